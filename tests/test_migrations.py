"""Redis stores written by earlier builds open and upgrade, losing nothing.

The fixtures in tests/fixtures/ (see its README.md). The SQLite store's steps before
the first release are gone (a store of those builds is refused:
tests/test_sqlite_baseline.py, with the migration machinery's test); the Redis ones
go with the Redis store's baseline.
"""

from __future__ import annotations

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


# -- schema version 4: failed downloads are counted ------------------------------------


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
