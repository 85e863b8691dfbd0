"""Offline learning and evaluation; never imported by a running crawl."""

from scrapy_recrawl.core.simulate import ReplayResult, load_changes, simulate

__all__ = ["ReplayResult", "load_changes", "simulate"]
