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
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.history.request_scrub import scrub_previous

from .fixtures.redis_typed import load_typed
from .fixtures.v3_requests import request as _v3_request
from .fixtures.v5_requests import SECRETS as V5_SECRETS
from .fixtures.v5_requests import spider_part as v5_spider_part

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
        # kept up to version 3, then dropped by version 4: models were pickles
        assert store.side_get("basket_model", [1]) == [None]
    db = sqlite3.connect(path)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    db.close()
    assert int(version) == SCHEMA_VERSION == 8
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
    assert client.hget("{recrawl}:meta", "schema_version") == str(SCHEMA_VERSION).encode()
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
    assert store.side_get("basket_model", [1]) == [None]  # dropped by version 4


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
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
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
    assert client.hget("{recrawl}:meta", "schema_version") == str(SCHEMA_VERSION).encode()
    assert client.hget("{recrawl}:meta", "spider") == b"news"
    assert any("adopts" in r.getMessage() for r in caplog.records)
    client.close()


def test_a_new_store_is_claimed_silently(tmp_path, caplog):
    with SqliteHistoryStore(tmp_path / "new.sqlite3") as store, caplog.at_level("INFO"):
        claim_store(store, "news", {})
        assert store.owner() == "news"
    assert not caplog.records


# -- schema version 3: requests and the basket model were pickles ----------------------


class _Marker:
    """A pickle that would create a file when unpickled (os.system)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.path}",))


def _evil(path) -> bytes:
    import pickle

    return pickle.dumps({"url": "http://h/evil", "meta": {"x": _Marker(path)}}, protocol=4)


def _check_v3(store, caplog) -> None:
    assert len(store) == 3 and store.cycle == 3
    assert store.arrays().columns["n"].tolist() == [2, 2, 2]
    # kept as data by version 4; what the downloader middlewares added (the Accept
    # header) and the cookies dropped by version 6 (history/request_scrub.py)
    want = [scrub_previous(_v3_request(u)) for u in range(3)]
    assert store.requests(np.array([1, 2, 3])) == want
    assert all("cookies" not in d and b"Accept" not in d["headers"] for d in want)
    assert want[0]["cb_kwargs"] == {"n": 0} and want[0]["headers"] == {b"X-Page": [b"0"]}
    assert store.owner() == "books"
    assert store.side_get("basket_model", [1]) == [None]
    dropped = [r.getMessage() for r in caplog.records if "basket model" in r.getMessage()]
    assert len(dropped) == 1 and "recrawl-baskets" in dropped[0] and "pickle" in dropped[0]
    assert ProbeStore(store).active()[0].prev_sig == b"sig-prev"
    assert BagStore(store, keep=3, window=3).bags(1) == _expected_bags(1)
    assert store.pop_frontier(10) == [scrub_previous(_v3_request(9))]


def test_a_version_3_sqlite_store_keeps_its_requests_as_data(tmp_path, caplog):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v3.sqlite3", path)
    with caplog.at_level("WARNING"), SqliteHistoryStore(path) as store:
        _check_v3(store, caplog)
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    blobs = [r[0] for r in db.execute("SELECT request FROM requests")]
    db.close()
    assert blobs and not any(b.startswith(b"\x80") for b in blobs)  # no pickle left


def test_a_version_3_redis_store_keeps_its_requests_as_data(redis_db, caplog):  # noqa: F811
    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v3.redis.json")
    assert client.hget("books:history:meta", "schema_version") == b"3"
    with caplog.at_level("WARNING"), RedisHistoryStore(redis_db.url, key="books:history") as s:
        _check_v3(s, caplog)
    assert client.hget("{books:history}:meta", "schema_version") == str(SCHEMA_VERSION).encode()
    assert not client.exists("books:history:side:basket_model")
    assert not any(v.startswith(b"\x80") for v in client.hvals("books:history:req"))
    client.close()


def test_a_pickle_needing_code_is_dropped_by_the_migration_never_run(
    tmp_path,
    redis_db,  # noqa: F811
    caplog,
):
    marker = tmp_path / "ran"
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v3.sqlite3", path)
    db = sqlite3.connect(path)
    db.execute("UPDATE requests SET request = ? WHERE url_id = 3", (_evil(marker),))
    db.execute("UPDATE frontier SET request = ?", (_evil(marker),))
    db.commit()
    db.close()
    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v3.redis.json")
    client.hset("books:history:req", 3, _evil(marker))
    for field in client.hkeys("books:history:frontier:req"):
        client.hset("books:history:frontier:req", field, _evil(marker))
    stores = [SqliteHistoryStore(path), RedisHistoryStore(redis_db.url, key="books:history")]
    for store in stores:
        caplog.clear()
        with caplog.at_level("WARNING"), store:
            assert store.requests(np.array([1, 2, 3])) == [
                scrub_previous(_v3_request(u)) for u in (0, 1)
            ] + [None]
            assert store.frontier_size() == 0 and store.pop_frontier(10) == []
            assert store.urls(np.array([3])) == ["http://h/2"]  # the URL stays
        said = [r.getMessage() for r in caplog.records if "needed code" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith("recrawl: 2 stored request(s)")
    assert not marker.exists()
    assert not client.exists("books:history:frontier:fp")


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
    # the change window (version 7) is the last column: the columns before it here
    after = [r[:-1] for r in db.execute("SELECT * FROM urls ORDER BY id")]
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
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
        # version 5's narrower row (history/redis_schema.py) holds every value
        flags = {"gone": 1, "has_body": 2, "present": 4, "sad": 8}
        for name in ROW_DTYPE_V3.names:
            got = (rows["flags"] & flags[name] > 0) if name in flags else rows[name]
            if name in ("D", "A", "R", "M"):  # u16 counts, 65535: none yet
                got = np.where(got == 65535, np.nan, got)
            want = old[name] > 0 if name in flags else old[name]
            np.testing.assert_array_equal(got, want, err_msg=name)
        assert rows["failures"].tolist() == [0, 0, 0]
        assert rows["last_failure_cycle"].tolist() == [-1, -1, -1]
        assert store.arrays().columns["n"].tolist() == [2, 2, 2]
        assert store.owner() == "books" and len(store.visit_log()["url_id"]) == 9
        rec = store.record(Visit(bytes([2]) * 20, "http://h/2", 2000.0, 0))
        assert (rec.id, rec.failures, rec.last_failure_cycle, rec.n, rec.X) == (3, 1, 3, 2, 1)
    assert client.hget("{books:history}:meta", "schema_version") == str(SCHEMA_VERSION).encode()
    assert client.strlen("{books:history#0}:rows") == 3 * 87
    assert not client.exists("books:history:rows:0")  # the version-4 keys are gone
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


def _same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return a == b


def test_a_version_4_redis_store_keeps_every_value(redis_db, tmp_path):  # noqa: F811
    """Version 5's layout (history/redis_bulk.py: migrate_4_to_5) holds every value the
    version-4 store held: compared with the same history in SQLite (made by the same
    release, tests/fixtures/make_v4_stores.py), which version 5 leaves as it was."""
    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v4.redis.json")
    assert client.hget("books:history:meta", "schema_version") == b"4"
    epoch = client.hget("books:history:meta", "epoch").decode()
    tables = ("content_bags", "content_dists", "basket_probes", "basket_model")
    side = {
        t: sorted((int(k), v) for k, v in client.hgetall(f"books:history:side:{t}").items())
        for t in tables
    }
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v4.sqlite3", path)
    with (
        SqliteHistoryStore(path) as want,
        RedisHistoryStore(redis_db.url, key="books:history") as got,
    ):
        assert got.epoch == epoch and got.shards == 1  # the same store, ids kept
        assert got.owner() == want.owner() == "books"
        assert got.cycle == want.cycle == 4 and len(got) == len(want) == 5
        for u in range(5):
            a, b = got.get(bytes([u]) * 20), want.get(bytes([u]) * 20)
            for field in b.__dataclass_fields__:
                assert _same_value(getattr(a, field), getattr(b, field)), (u, field)
            assert got.body(bytes([u]) * 20) == want.body(bytes([u]) * 20)
        ids = np.arange(1, 6)
        assert got.requests(ids) == want.requests(ids) and got.urls(ids) == want.urls(ids)
        x, y = got.arrays(), want.arrays()
        assert x.ids.tolist() == y.ids.tolist() and x.cycle == y.cycle
        for name, col in y.columns.items():
            np.testing.assert_array_equal(x.columns[name], col, err_msg=name)
        for name, col in want.visit_log().items():
            np.testing.assert_array_equal(got.visit_log()[name], col, err_msg=name)
        np.testing.assert_array_equal(got.visit_log(since_cycle=3)["cycle"], [3] * 5 + [4] * 5)
        np.testing.assert_array_equal(got.change_window(ids, 3), want.change_window(ids, 3))
        for table in tables:  # as the Redis store kept them (SQLite's model was fit apart)
            assert list(got.side_items(table)) == side[table] != [], table
        assert got.frontier_size() == want.frontier_size() == 2
        assert got.pop_frontier(5) == want.pop_frontier(5)
        rec = got.record(Visit(bytes([3]) * 20, "http://h/3", 2000.0, 200))
        assert (rec.id, rec.failures, rec.visits) == (4, 0, 5)  # ids go on where they were
    assert client.keys("books:history:*") == []  # the version-4 keys are gone
    assert client.hget("{books:history}:meta", "schema_version") == str(SCHEMA_VERSION).encode()


def test_an_interrupted_migration_to_5_runs_again_and_fences_off_the_old_release(
    redis_db,  # noqa: F811
    monkeypatch,
):
    from scrapy_recrawl.history import redis_bulk

    client = redis_db.client()
    load_typed(client, FIXTURES / "store_v4.redis.json")
    real = redis_bulk.write_bulk

    def broken(*args, **kwargs):
        real(*args, **kwargs)
        raise ConnectionError("the network went away mid-migration")

    monkeypatch.setattr(redis_bulk, "write_bulk", broken)
    with pytest.raises(HistoryStoreError, match="cannot migrate.*went away"):
        RedisHistoryStore(redis_db.url, key="books:history").open()
    # an old-release process's guarded writes are refused from the start (no epoch)
    assert client.hget("books:history:meta", "epoch") is None
    assert client.hget("{books:history}:meta", "schema_version") is None  # not marked done
    monkeypatch.setattr(redis_bulk, "write_bulk", real)
    client.hdel("books:history:meta", "migrating")  # or wait MIGRATION_STALE seconds
    with RedisHistoryStore(redis_db.url, key="books:history") as store:
        assert len(store) == 5 and store.cycle == 4
        assert store.urls(np.arange(1, 6)) == [f"http://h/{u}" for u in range(5)]
        assert len(store.visit_log()["url_id"]) == 20


# -- schema version 6: no credential kept at rest -----------------------------------


def _v5_ids(store) -> list[int]:
    # a Redis store's ids are spread over its shards
    return [store.get(bytes([u]) * 20, signature=False).id for u in range(4)]


def _secrets_in(data: bytes) -> list[bytes]:
    return [s for s in V5_SECRETS if s in data]


def _check_v5(store) -> None:
    """What version 6 keeps of the requests version 5 stored (tests/fixtures/v5_requests):
    the spider's own header and meta, never a credential, cookie, User-Agent, timeout
    or proxy of the crawl that stored it."""
    assert len(store) == 4 and store.cycle == 3 and store.owner() == "books"
    assert store.requests(_v5_ids(store)) == [v5_spider_part(u) for u in range(4)]
    assert store.arrays().columns["n"].tolist() == [2, 2, 2, 2]  # the history kept
    assert store.pop_frontier(5) == [v5_spider_part(8), v5_spider_part(9)]


def test_a_version_5_sqlite_store_is_scrubbed_of_credentials(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v5.sqlite3", path)
    path.chmod(0o644)  # as the previous release created it
    assert _secrets_in(path.read_bytes()) == list(V5_SECRETS)  # the fixture holds them all
    with SqliteHistoryStore(path) as store:
        _check_v5(store)
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    db.close()
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.lock")):
        if name.exists():  # free pages and the WAL included: the file was rebuilt
            assert _secrets_in(name.read_bytes()) == [], name
            assert name.stat().st_mode & 0o077 == 0, name  # its owner's only now


def test_a_version_5_sqlite_store_read_by_an_offline_command_is_scrubbed_in_memory(tmp_path):
    path = tmp_path / "history.sqlite3"
    shutil.copy(FIXTURES / "store_v5.sqlite3", path)
    with SqliteHistoryStore(path, read_only=True) as store:
        assert store.requests(np.arange(1, 5)) == [v5_spider_part(u) for u in range(4)]
    assert store.file_schema_version == 5  # the file left as it was, for the next crawl


def test_a_version_5_redis_store_is_scrubbed_of_credentials(redis_deployment):  # noqa: F811
    """On one redis-server and on a Redis Cluster (each shard's rewrite is one script on
    one slot)."""
    client = redis_deployment.client()
    load_typed(client, FIXTURES / "store_v5.redis.json")
    # the shape dictionary, the inline and big blobs, earlier visits' blobs, the frontier
    assert _secrets_in(b"".join(_values(client))) == list(V5_SECRETS)
    assert client.hget("{books:history}:meta", "schema_version") == b"5"
    with redis_deployment.store("books:history") as store:
        _check_v5(store)
        assert store.unreadable_values == 0
        # the store goes on: a visit appends to the rewritten blobs
        store.record(Visit(bytes([1]) * 20, "http://h/1", 2000.0, 200, request=v5_spider_part(1)))
        store.flush()
        assert store.requests(_v5_ids(store)[1:2]) == [v5_spider_part(1)]
    assert client.hget("{books:history}:meta", "schema_version") == str(SCHEMA_VERSION).encode()
    assert _secrets_in(b"".join(_values(client))) == []
    with redis_deployment.store("books:history") as again:  # opened again: as it is
        assert again.requests(_v5_ids(again)) == [v5_spider_part(u) for u in range(4)]
    client.close()


def test_the_migration_to_6_starts_a_shard_again_when_a_writer_appends_meanwhile(
    redis_db,  # noqa: F811
    monkeypatch,
):
    from scrapy_recrawl.history import redis_scrub

    client = redis_db.client()
    real, calls, writer = redis_scrub._scrub_blob, [], []

    def counted(data):
        if writer and not calls:  # an old-release crawler appends meanwhile
            for key in writer:
                client.append(key, b"\0appended")
        calls.append(data)
        return real(data)

    monkeypatch.setattr(redis_scrub, "_scrub_blob", counted)
    load_typed(client, FIXTURES / "store_v5.redis.json")
    with RedisHistoryStore(redis_db.url, key="books:history"):
        pass
    alone = len(calls)  # blobs scrubbed when nobody else writes
    client.flushall()
    load_typed(client, FIXTURES / "store_v5.redis.json")
    writer += list(client.scan_iter("{books:history#*}:blobs"))
    calls.clear()
    with RedisHistoryStore(redis_db.url, key="books:history") as store:
        _check_v5(store)
    assert len(calls) > alone  # a shard read again after the write
    assert _secrets_in(b"".join(_values(client))) == []
    client.close()


def _values(client) -> list[bytes]:
    """Every key name and value of the Redis, whatever its type (every node's)."""
    out = []
    for key in client.scan_iter("*"):
        out.append(key)
        kind = client.type(key)
        if kind == b"string":
            out.append(client.get(key))
        elif kind == b"hash":
            out += [b for kv in client.hgetall(key).items() for b in kv]
        elif kind == b"zset":
            out += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == b"list":
            out += client.lrange(key, 0, -1)
        elif kind == b"stream":
            out += [b for _, e in client.xrange(key) for kv in e.items() for b in kv]
        else:
            raise AssertionError(f"{key!r}: a {kind!r}")
    return out
