"""Estimating how often a page changes from a few early fetches (loop-time baskets, paper 001).

* :mod:`~scrapy_recrawl.estimate.baskets`: features, labels, the random-forest
  classifier (scikit-learn, the ``ml`` extra, imported lazily) and the paper's
  error distribution;
* :mod:`~scrapy_recrawl.estimate.probes`: the probe schedule and its state in
  the history store, used by the recrawl scheduler.
"""
