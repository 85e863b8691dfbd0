"""The example project: a plain Scrapy project and a local site whose pages change.

* ``example_project.site``: the test site (``python -m example_project.site``), a
  deterministic content model served over HTTP, with simulated days and ground truth.
* ``example_project.truth``: ChangeRate and freshness per cycle from the site's truth.
* ``example_project.reference``: the reference site, a shop and a news site with the
  boilerplate real sites have and their ground truth, and scores against it
  (``python -m example_project.reference``).
* ``example_project/scrapy.cfg`` and ``example_project.recrawl_demo``: the Scrapy
  project, with the spiders ``site``, ``shop`` and ``news``.
"""
