"""The first migration since the release: stores made by v0.1.0's own code (schema
version 8, tests/fixtures/make_v8_stores.py) open with this code and upgrade to 9;
what this code reads of them equals what v0.1.0 read (recorded beside each fixture
when it was made): arrays(), every URL's record and stored request, the frontier.

SQLite's step builds the packed copy of the scoring columns (history/sqlite_packed.py)
from the urls table; Redis's only records the version (its format is unchanged).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np

from scrapy_recrawl.history import SCHEMA_VERSION, SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore

from .fixtures.redis_typed import load_typed
from .fixtures.v8_visits import URLS, plain

FIXTURES = Path(__file__).parent / "fixtures"


def _expected(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.expected.json").read_text())


def _check_reads(store, expected: dict) -> None:
    """What ``store`` reads equals what v0.1.0 read of the same store."""
    assert store.cycle == expected["cycle"] and store.owner() == expected["owner"]
    arrays = store.arrays()
    assert arrays.ids.tolist() == expected["ids"]
    assert sorted(arrays.columns) == sorted(expected["columns"])
    for name, values in expected["columns"].items():
        assert plain(arrays.columns[name].tolist()) == values, name
    for u in range(URLS):
        got = plain(vars(store.get(bytes([u + 1]) * 20)))
        want = expected["records"][str(u)]
        assert {k: got[k] for k in want} == want, u
    assert plain(store.requests(np.asarray(expected["ids"]))) == expected["requests"]
    assert plain(store.pop_frontier(10)) == expected["frontier"]


def _version(path: Path) -> str:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        db.close()


def test_the_v8_sqlite_store_upgrades_to_9_and_reads_as_v010_read_it(tmp_path):
    assert SCHEMA_VERSION == 9
    path = tmp_path / "store.sqlite3"
    shutil.copy(FIXTURES / "store_v8.sqlite3", path)
    assert _version(path) == "8"
    with SqliteHistoryStore(path) as store:
        assert _version(path) == "9"
        blocks = store.db.execute("SELECT COUNT(*) FROM packed").fetchone()[0]
        assert blocks == 1  # six URLs: one block, made by the step
        oracle = store._arrays_from_urls()
        _check_reads(store, _expected("store_v8.sqlite3"))
        arrays = store.arrays()
        np.testing.assert_array_equal(arrays.ids, oracle.ids)
        for name, col in oracle.columns.items():
            np.testing.assert_array_equal(arrays.columns[name], col)


def test_the_v8_sqlite_store_is_upgraded_in_memory_for_a_reader(tmp_path):
    path = tmp_path / "store.sqlite3"
    shutil.copy(FIXTURES / "store_v8.sqlite3", path)
    before = path.read_bytes()
    expected = _expected("store_v8.sqlite3")
    with SqliteHistoryStore(path, read_only=True) as store:
        assert store.file_schema_version == 8
        arrays = store.arrays()
        assert arrays.ids.tolist() == expected["ids"]
        for name, values in expected["columns"].items():
            assert plain(arrays.columns[name].tolist()) == values, name
    assert path.read_bytes() == before and _version(path) == "8"


def test_the_v8_redis_store_upgrades_to_9_and_reads_as_v010_read_it(redis_db):
    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v8.redis.json")
    assert client.hget("{books:history}:meta", "schema_version") == b"8"
    with RedisHistoryStore(redis_db.url, key="books:history") as store:
        assert client.hget("{books:history}:meta", "schema_version") == b"9"
        _check_reads(store, _expected("store_v8.redis"))
    with RedisHistoryStore(redis_db.url, key="books:history") as store:  # at 9: as it is
        assert len(store) == URLS and store.frontier_size() == 0
    client.close()
