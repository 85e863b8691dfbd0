"""Offline learning and evaluation; never imported by a running crawl."""

from scrapy_recrawl.learn.simulate import ReplayResult, load_changes, simulate

__all__ = ["ReplayResult", "load_changes", "simulate"]
