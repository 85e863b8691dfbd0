"""A backend of one's own: the built-in SQLite store, one file per spider.

Named by ``RECRAWL_STORE_CLASS = "recrawl_example_plugin.PerSpiderSqliteStore"``
with ``EXAMPLE_STORE_DIR`` the directory of the files (``<spider>.sqlite3``), as
Scrapy's HTTP cache keeps one folder per spider under ``HTTPCACHE_DIR``. The crawl
builds it with ``from_settings(settings, spider=..., read_only=...)``: an offline
command (``scrapy recrawl-report``) gets it read-only, never created or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrapy_recrawl.api import HistoryStoreError, SqliteHistoryStore


class PerSpiderSqliteStore(SqliteHistoryStore):
    """SQLite, in ``EXAMPLE_STORE_DIR/<spider>.sqlite3`` (``default`` without a spider)."""

    @classmethod
    def from_settings(
        cls, settings: Any, *, spider: str | None = None, read_only: bool = False
    ) -> PerSpiderSqliteStore:
        directory = settings.get("EXAMPLE_STORE_DIR")
        if not directory:
            # a HistoryStoreError is said in one line at start-up, naming the setting
            raise HistoryStoreError("EXAMPLE_STORE_DIR is not set: the directory of the stores")
        Path(directory).mkdir(parents=True, exist_ok=True)
        path = Path(directory) / f"{spider or 'default'}.sqlite3"
        return cls(path, read_only=read_only, flush_every=3)
