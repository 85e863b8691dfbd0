"""The Scrapy project of the example: the spider ``site`` for the local test site, and
``shop`` and ``news`` for the reference site (``example_project.reference``)."""
