"""Per-URL history: the store interface and its backends.

Plain data and files: no Scrapy, no Twisted. Which store a setting names is
scrapy_recrawl/stores.py's (open_store); the one open store per crawler, and what the
crawl does around it (signals, closing the spider), scrapy_recrawl/runtime.py's.
"""

from __future__ import annotations

from .base import (
    SCHEMA_VERSION,
    FlushFailed,
    HistoryArrays,
    HistoryStore,
    HistoryStoreError,
    StoredBody,
    UrlRecord,
    Visit,
)
from .epoch import StoreLost
from .ownership import StoreRefused
from .sqlite import SqliteHistoryStore

__all__ = [
    "SCHEMA_VERSION",
    "FlushFailed",
    "HistoryArrays",
    "HistoryStore",
    "HistoryStoreError",
    "SqliteHistoryStore",
    "StoreLost",
    "StoreRefused",
    "StoredBody",
    "UrlRecord",
    "Visit",
]
