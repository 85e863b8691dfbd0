"""Stores written by the previous release (schema version 1) open and upgrade, losing nothing.

The fixtures in tests/fixtures/ were written by scrapy-recrawl 0.1.0 with
tests/fixtures/make_v1_stores.py (see tests/fixtures/README.md).
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.change.bow import bag_from_text
from scrapy_recrawl.content.store import BagStore
from scrapy_recrawl.estimate.probes import ProbeStore
from scrapy_recrawl.history import SCHEMA_VERSION, SqliteHistoryStore
from scrapy_recrawl.history.records import unpack_record
from scrapy_recrawl.history.redis import RedisHistoryStore

from .redis_server import redis_db, redis_server  # noqa: F401 -- fixtures

FIXTURES = Path(__file__).parent / "fixtures"


def _expected_bags(u: int) -> list:
    # as make_v1_stores.py wrote them, newest first, three kept
    return [bag_from_text(f"page {u} words version {v} " * (v + 1)) for v in (2, 1, 0)]


def _check_history(store) -> None:
    arrays = store.arrays()
    assert len(arrays) == 3 and arrays.cycle == 3
    assert arrays.columns["n"].tolist() == [2, 2, 2]
    log = store.visit_log()
    assert len(log["url_id"]) == 9
    assert store.requests(np.array([1]))[0]["url"] == "http://h/0"
    bags = BagStore(store, keep=3, window=3)
    for u in (1, 2):
        assert bags.bags(u) == _expected_bags(u)
    # the last visit measured D1, D2 against the two older bags (no third yet)
    assert np.isfinite(bags.d_columns(np.array([1, 2]))[:, :2]).all()
    assert bags.bags(3) == []


def test_a_version_1_sqlite_store_upgrades(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v1.sqlite3", path)
    with SqliteHistoryStore(path) as store:
        _check_history(store)
        probes = ProbeStore(store)
        active = probes.active()
        assert [st.url_id for st in active] == [1]
        assert active[0].first_sig == b"sig-first" and active[0].prev_sig == b"sig-prev"
        np.testing.assert_array_equal(active[0].features, np.arange(64, dtype=float))
        ids, baskets = probes.baskets()
        assert ids.tolist() == [2] and baskets.tolist() == [3]
        model = unpack_record(store.side_get("basket_model", [1])[0])
        assert model["model"] == b"model-bytes" and model["saved"] == 1234.5
    db = sqlite3.connect(path)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    db.close()
    assert int(version) == SCHEMA_VERSION == 2
    assert not tables & {"content_bags", "basket_probes", "basket_model"}


def test_a_failed_migration_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    from scrapy_recrawl.history import sqlite_schema

    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v1.sqlite3", path)

    def broken(db):
        db.execute("DROP TABLE content_bags")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setitem(sqlite_schema.MIGRATIONS, 1, broken)
    with pytest.raises(Exception, match="disk I/O error"):
        SqliteHistoryStore(path).open()
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM content_bags").fetchone()[0] == 2
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
    db.close()


def load_redis_fixture(client, path) -> None:
    """Write a store saved key by key, by type, in base64 (tests/fixtures/README.md):
    unlike DUMP payloads, which only the Redis version that made them restores."""

    def b(v):
        return base64.b64decode(v)

    for key, item in json.loads(path.read_text()).items():
        kind, value = item["type"], item["value"]
        if kind == "string":
            client.set(key, b(value))
        elif kind == "hash":
            client.hset(key, mapping={b(f): b(v) for f, v in value.items()})
        elif kind == "list":
            client.rpush(key, *map(b, value))
        elif kind == "set":
            client.sadd(key, *map(b, value))
        elif kind == "zset":
            client.zadd(key, {b(m): score for m, score in value})
        elif kind == "stream":
            for entry_id, fields in value:
                client.xadd(key, {b(f): b(v) for f, v in fields.items()}, id=entry_id)
        else:
            raise ValueError(f"{path}: {key} has an unknown type {kind!r}")


def test_a_version_1_redis_store_upgrades(redis_db):  # noqa: F811
    client = redis_db.client()
    load_redis_fixture(client, FIXTURES / "store_v1.redis.json")
    assert client.hget("recrawl:meta", "schema_version") == b"1"
    with RedisHistoryStore(redis_db.url) as store:
        _check_history(store)
    assert client.hget("recrawl:meta", "schema_version") == b"2"
    assert not client.exists("recrawl:bags", "recrawl:dists")
    client.close()
