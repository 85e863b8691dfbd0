"""Content-aware change prediction (Radinsky & Bennett 2013, paper 004).

* :mod:`~scrapy_recrawl.change.bow` (in `change/`, as the detector computes bags): bounded bags of words, the chi-squared
  significant-change test (Eq. 1), cosine change magnitude;
* :mod:`~scrapy_recrawl.content.window`: the 2D window features ``C1..Cl``,
  ``D1..Dl``;
* :mod:`~scrapy_recrawl.content.related`: related pages as experts (temporal
  cross-correlation, sec. 6.3), kept up to date incrementally, the ``Q`` evidence;
* :mod:`~scrapy_recrawl.content.store`: the bags beside the SQLite or Redis
  history store and the columns the scheduler adds;
* :mod:`~scrapy_recrawl.content.replay`: the replay with the new terminals;
* :mod:`~scrapy_recrawl.content.evaluate`: 1D / 2D / 3D prediction accuracy
  (the paper's Table 1), offline, scikit-learn (the ``ml`` extra).

docs/content.md describes all of it.
"""
