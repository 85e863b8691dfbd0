"""Stores written by earlier releases open and upgrade, losing nothing.

The fixtures in tests/fixtures/ (see its README.md): schema version 1, written by
scrapy-recrawl 0.1.0 with make_v1_stores.py; schema version 2, written by the
release before stores knew their spider (commit d96f17e) with make_v2_stores.py.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.change.bow import bag_from_text
from scrapy_recrawl.content.store import BagStore
from scrapy_recrawl.estimate.probes import ProbeStore
from scrapy_recrawl.history import SCHEMA_VERSION, HistoryStoreError, SqliteHistoryStore, Visit
from scrapy_recrawl.history.ownership import claim_store
from scrapy_recrawl.history.records import unpack_record
from scrapy_recrawl.history.redis import RedisHistoryStore

from .fixtures.redis_typed import load_typed
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
    assert int(version) == SCHEMA_VERSION == 4
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


def test_a_version_1_redis_store_upgrades(redis_db):  # noqa: F811
    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v1.redis.json")
    assert client.hget("recrawl:meta", "schema_version") == b"1"
    with RedisHistoryStore(redis_db.url) as store:
        _check_history(store)
    assert client.hget("recrawl:meta", "schema_version") == b"4"
    assert not client.exists("recrawl:bags", "recrawl:dists")
    client.close()


# -- schema version 2: the store did not know its spider ------------------------------


def _check_v2(store) -> None:
    arrays = store.arrays()
    assert len(arrays) == 3 and arrays.cycle == 3 and store.cycle == 3
    assert arrays.columns["n"].tolist() == [2, 2, 2]
    assert arrays.columns["X"].tolist() == [1, 1, 1]
    assert len(store.visit_log()["url_id"]) == 9
    assert store.requests(np.array([2]))[0] == {
        "url": "http://h/1",
        "method": "GET",
        "callback": "parse_page",
    }
    assert store.frontier_size() == 1
    bags = BagStore(store, keep=3, window=3)
    for u in (1, 2):
        assert bags.bags(u) == _expected_bags(u)
    active = ProbeStore(store).active()
    assert [st.url_id for st in active] == [1] and active[0].prev_sig == b"sig-prev"
    np.testing.assert_array_equal(active[0].features, np.arange(8, dtype=float))
    model = unpack_record(store.side_get("basket_model", [1])[0])
    assert model["model"] == b"model-bytes"


def test_a_version_2_sqlite_store_upgrades_and_is_adopted_by_its_first_spider(tmp_path, caplog):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v2.sqlite3", path)
    with SqliteHistoryStore(path) as store:
        _check_v2(store)
        assert store.owner() is None  # written before stores knew their spider
        with caplog.at_level("WARNING"):
            claim_store(store, "news", {})
        assert store.owner() == "news"
    adopted = [r.getMessage() for r in caplog.records if "adopts" in r.getMessage()]
    assert len(adopted) == 1 and "'news'" in adopted[0] and str(path) in adopted[0]
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("4",)
    db.close()
    caplog.clear()
    with SqliteHistoryStore(path) as store:
        _check_v2(store)
        claim_store(store, "news", {})  # its own: nothing said
        assert not caplog.records
        with pytest.raises(HistoryStoreError, match="belongs to the spider 'news', not 'blog'"):
            claim_store(store, "blog", {})
        claim_store(store, "blog", {"RECRAWL_SHARED_STORE": True})  # shared on purpose
        assert store.owner() == "news"
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "RECRAWL_SHARED_STORE" in errors[0].getMessage()


def test_a_version_2_redis_store_upgrades_and_is_adopted(redis_db, caplog):  # noqa: F811
    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v2.redis.json")
    assert client.hget("recrawl:meta", "schema_version") == b"2"
    with RedisHistoryStore(redis_db.url, key="recrawl") as store:
        _check_v2(store)
        assert store.owner() is None
        with caplog.at_level("WARNING"):
            claim_store(store, "news", {})
        assert store.owner() == "news"
        with pytest.raises(HistoryStoreError, match="key prefix 'recrawl'.*'news', not 'blog'"):
            claim_store(store, "blog", {})
    assert client.hget("recrawl:meta", "schema_version") == b"4"
    assert client.hget("recrawl:meta", "spider") == b"news"
    assert any("adopts" in r.getMessage() for r in caplog.records)
    client.close()


def test_a_new_store_is_claimed_silently(tmp_path, caplog):
    with SqliteHistoryStore(tmp_path / "new.sqlite3") as store, caplog.at_level("INFO"):
        claim_store(store, "news", {})
        assert store.owner() == "news"
    assert not caplog.records


# -- schema version 4: failed downloads are counted ------------------------------------


def test_a_version_3_sqlite_store_gains_failure_counts_and_keeps_every_row(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v3.sqlite3", path)
    db = sqlite3.connect(path)
    before = db.execute("SELECT * FROM urls ORDER BY id").fetchall()
    visits = db.execute("SELECT * FROM visits ORDER BY id").fetchall()
    db.close()
    assert len(before) == 3
    with SqliteHistoryStore(path) as store:
        assert store.owner() == "books" and store.cycle == 3
        arrays = store.arrays()
        assert arrays.columns["failures"].tolist() == [0, 0, 0]
        assert arrays.columns["last_failure_cycle"].tolist() == [-1, -1, -1]
        assert arrays.columns["n"].tolist() == [2, 2, 2]
        rec = store.record(Visit(bytes([0]) * 20, "http://h/0", 2000.0, 0))
        assert (rec.failures, rec.last_failure_cycle, rec.n) == (1, 3, 2)
    db = sqlite3.connect(path)
    after = db.execute("SELECT * FROM urls ORDER BY id").fetchall()
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("4",)
    assert db.execute("SELECT * FROM visits ORDER BY id").fetchall()[: len(visits)] == visits
    db.close()
    # every old column as it was (the visit above changed row 1's visits, status, failures)
    assert [r[:-2] for r in after[1:]] == before[1:] and [r[-2:] for r in after[1:]] == [
        (0, -1)
    ] * 2


def test_a_version_3_redis_store_widens_its_rows_and_keeps_every_value(redis_db):  # noqa: F811
    from scrapy_recrawl.history.redis_schema import ROW_DTYPE_V3

    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v3.redis.json")
    assert client.hget("books:history:meta", "schema_version") == b"3"
    old = np.frombuffer(client.get("books:history:rows:0"), dtype=ROW_DTYPE_V3).copy()
    assert len(old) == 3
    with RedisHistoryStore(redis_db.url, key="books:history") as store:
        rows, cycle = store.rows()
        assert cycle == 3 and len(rows) == 3
        for name in ROW_DTYPE_V3.names:
            np.testing.assert_array_equal(rows[name], old[name], err_msg=name)
        assert rows["failures"].tolist() == [0, 0, 0]
        assert rows["last_failure_cycle"].tolist() == [-1, -1, -1]
        assert store.arrays().columns["n"].tolist() == [2, 2, 2]
        assert store.owner() == "books" and len(store.visit_log()["url_id"]) == 9
        rec = store.record(Visit(bytes([2]) * 20, "http://h/2", 2000.0, 0))
        assert (rec.id, rec.failures, rec.last_failure_cycle, rec.n, rec.X) == (3, 1, 3, 2, 1)
    assert client.hget("books:history:meta", "schema_version") == b"4"
    assert client.strlen("books:history:rows:0") == 3 * 120
    with RedisHistoryStore(redis_db.url, key="books:history") as store:  # once only
        assert store.rows()[0]["failures"].tolist() == [0, 0, 1]
    client.close()


def test_the_redis_migration_starts_again_when_an_old_release_writes_meanwhile(redis_db):  # noqa: F811
    """WATCH: a row written by a process of the old release between the migration's read
    and its write is not lost (the step runs again on what is there then)."""
    from scrapy_recrawl.history.redis_schema import ROW_DTYPE_V3

    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v3.redis.json")
    store = RedisHistoryStore(redis_db.url, key="books:history")
    real = store._v4_failure_counts
    calls = []

    def interrupted(pipe):
        writes = real(pipe)
        if not calls:  # the first time: an old crawler rewrites row 1 meanwhile
            row = np.frombuffer(client.get("books:history:rows:0"), dtype=ROW_DTYPE_V3).copy()
            row["visits"][0] = 99
            client.set("books:history:rows:0", row.tobytes())
        calls.append(1)
        return writes

    store._v4_failure_counts = interrupted
    with store:
        assert len(calls) == 2
        assert store.rows()[0]["visits"].tolist()[0] == 99
    client.close()
