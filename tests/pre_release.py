"""A SQLite store as a build before the first release left it: this release's tables
with a few URLs, and the ``meta`` row ``schema_version`` saying an older version (what
the refusal reads; tests/test_sqlite_baseline.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from scrapy_recrawl.history import SqliteHistoryStore, Visit


def store_file(path: Path, version: int | None = None, owner: str | None = "pages") -> Path:
    """A store with two URLs over two cycles (``owner``: its spider, None: nobody's);
    ``version``: the schema version its meta row then says."""
    with SqliteHistoryStore(path) as store:
        if owner is not None:
            store.claim(owner)
        for cycle in (1, 2):
            store.advance_cycle()
            for u in (1, 2):
                store.record(Visit(bytes([u]) * 20, f"http://h/{u}", float(cycle), 200))
    if version is not None:
        db = sqlite3.connect(path)
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        db.commit()
        db.close()
    return path
