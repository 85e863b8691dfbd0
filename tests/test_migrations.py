"""Whose store: a new one is claimed by its spider without a word.

The stores of builds before the first release (schema versions 1 to 7) are refused,
not upgraded: tests/test_sqlite_baseline.py and tests/test_redis_migrations.py, each
with its backend's migration machinery tested on a made-up next step.
"""

from __future__ import annotations

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.ownership import claim_store


def test_a_new_store_is_claimed_silently(tmp_path, caplog):
    with SqliteHistoryStore(tmp_path / "new.sqlite3") as store, caplog.at_level("INFO"):
        claim_store(store, "news", {})
        assert store.owner() == "news"
    assert not caplog.records
