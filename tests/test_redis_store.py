"""The Redis history store on a real redis-server: same semantics as the SQLite
store, the Lua estimator update equal to state.observe, atomic updates under
concurrent processes, clear errors."""

from __future__ import annotations

import copy
import math
import multiprocessing
import random

import numpy as np
import pytest

from scrapy_recrawl.history import (
    HistoryStoreError,
    SqliteHistoryStore,
    UrlRecord,
    Visit,
    open_store,
)
from scrapy_recrawl.history.redis import PendingRecord, RedisHistoryStore
from scrapy_recrawl.history.state import observe
from scrapy_recrawl.settings import RecrawlSettingError

from .redis_server import free_port

FP = b"\x01" * 20


def visit(status=200, changed=None, t=1000.0, fp=FP, **kw):
    return Visit(
        fingerprint=fp, url="https://example.com/a", time=t, status=status, changed=changed, **kw
    )


@pytest.fixture
def store(redis_db):
    # one shard: ids in order, as SQLite gives them (test_redis_shards.py: 16 shards)
    s = RedisHistoryStore(redis_db.url, shards=1)
    s.open()
    yield s
    s.close()


def test_lua_estimators_equal_observe_bit_for_bit(store):
    rng = np.random.default_rng(7)
    for u in range(20):
        fp = u.to_bytes(20, "big")
        seq = rng.integers(0, 2, int(rng.integers(1, 120))).tolist()
        store.record(visit(fp=fp))  # the first fetch is no observation
        state = (0, 0, 0.0, 0.0, 0.0)
        for c in seq:
            rec = store.record(visit(fp=fp, changed=bool(c)))
            state = observe(*state, c)
            # exactly the same doubles, not approximately: one rule, written twice
            assert (rec.n, rec.X, rec.sad, rec.aad_sum, rec.gad) == state
        n = len(seq)
        w = 2.0 ** np.arange(n)
        assert rec.gad == pytest.approx(float((w * np.asarray(seq)).sum() / w.sum()), rel=1e-12)


def test_gad_stays_finite_for_long_histories(store):
    for _ in range(1200):  # 2^1200 would overflow a double
        rec = store.record(visit(changed=True))
    assert rec.gad == 1.0 and math.isfinite(rec.aad_sum)


def _random_visits(seed: int, urls: int = 12, count: int = 300) -> list[tuple[int, Visit]]:
    """(cycle advances before it, visit) pairs covering every branch of record()."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        u = rng.randrange(urls)
        status = rng.choice([200, 200, 200, 304, 304, 404, 410, 503, 0, 301])
        changed = rng.choice([None, True, False])
        out.append(
            (
                int(rng.random() < 0.15),
                Visit(
                    fingerprint=u.to_bytes(20, "big"),
                    url=f"https://example.com/{u}?v={i % 3}",
                    time=1000.0 + i * 0.5,
                    status=status,
                    changed=changed,
                    signature=rng.choice([None, f"sig{i}".encode()]),
                    distance=rng.randrange(10),
                    added=rng.randrange(3),
                    removed=rng.randrange(3),
                    modified=rng.randrange(3),
                    attributes=rng.randrange(3),
                    size=rng.randrange(5000),
                    etag=rng.choice([None, "", f'"e{i}"']),
                    last_modified=rng.choice(
                        [None, f"Mon, {i % 28 + 1:02d} Jan 2024 00:00:00 GMT"]
                    ),
                    gone=status in (404, 410),
                    request=rng.choice(
                        [None, {"url": f"https://example.com/{u}", "meta": {"i": i}}]
                    ),
                    body=rng.choice([None, f"<p>{i}</p>".encode()]),
                    headers={"Content-Type": ["text/html"]},
                    cycle=rng.choice([None, None, max(0, i // 40)]),
                ),
            )
        )
    return out


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_records_arrays_and_log_as_sqlite(store, tmp_path, seed):
    sqlite = SqliteHistoryStore(tmp_path / "h.sqlite3", flush_every=7)
    sqlite.open()
    for advance, v in _random_visits(seed):
        if advance:
            assert store.advance_cycle() == sqlite.advance_cycle()
        got, want = store.record(v), sqlite.record(v)
        for field in want.__dataclass_fields__:
            assert _same(getattr(got, field), getattr(want, field)), (field, got, want)
    sqlite.flush()
    assert store.cycle == sqlite.cycle and len(store) == len(sqlite)
    for u in range(12):
        fp = u.to_bytes(20, "big")
        got, want = store.get(fp), sqlite.get(fp)
        for field in want.__dataclass_fields__:
            assert _same(getattr(got, field), getattr(want, field)), field
        assert store.body(fp) == sqlite.body(fp)
        assert store.get(fp, signature=False).signature is None
    ids = np.arange(1, len(sqlite) + 1)
    assert store.requests(ids) == sqlite.requests(ids)
    assert store.urls(ids) == sqlite.urls(ids)
    a, b = store.arrays(), sqlite.arrays()
    assert a.cycle == b.cycle and a.ids.tolist() == b.ids.tolist()
    for name, col in b.columns.items():
        np.testing.assert_array_equal(a.columns[name], col, err_msg=name)
        assert a.columns[name].dtype == col.dtype, name
    la, lb = store.visit_log(), sqlite.visit_log()
    for name, col in lb.items():
        np.testing.assert_array_equal(la[name], col, err_msg=name)
    np.testing.assert_array_equal(
        store.visit_log([2, 3])["url_id"], sqlite.visit_log([2, 3])["url_id"]
    )
    sqlite.close()


def test_frontier_keeps_first_copy_orders_by_priority_then_age(store, tmp_path):
    sqlite = SqliteHistoryStore(tmp_path / "f.sqlite3")
    sqlite.open()
    items = [(bytes([i % 7]) * 20, {"url": f"u{i}"}, (i * 5) % 3 - 1) for i in range(20)]
    for s in (store, sqlite):
        assert s.push_frontier(items[:10]) == 7
        assert s.push_frontier(items[10:]) == 0
        assert s.frontier_size() == 7
    assert store.pop_frontier(3) == sqlite.pop_frontier(3)
    assert store.pop_frontier(100) == sqlite.pop_frontier(100)
    assert store.frontier_size() == 0 and store.pop_frontier(0) == []
    store.push_frontier([(b"x" * 20, {"url": "again"}, 0)])
    assert store.pop_frontier(1) == [{"url": "again"}]


def _hammer(url: str | int, worker: int, rounds: int) -> None:
    if isinstance(url, int):  # a Redis Cluster's first node
        from redis.cluster import RedisCluster

        store = RedisHistoryStore(client=RedisCluster(host="127.0.0.1", port=url), key="h")
    else:
        store = RedisHistoryStore(url)
    store.open()
    rng = random.Random(worker)
    for i in range(rounds):
        fp = rng.randrange(5).to_bytes(20, "big")
        store.record(Visit(fingerprint=fp, url="u", time=float(i), status=200, changed=i % 2 == 0))
    store.close()


@pytest.mark.parametrize("where", ["redis", "cluster"])
def test_concurrent_processes_lose_no_update(request, where):
    """Four processes fold visits of the same five URLs, buffered and flushed in batches:
    every visit is in the log once and in its URL's counters (atomic per URL)."""
    if where == "cluster":
        cluster = request.getfixturevalue("redis_cluster_db")
        target = cluster.nodes[0].port
        store = RedisHistoryStore(client=cluster.client(), key="h")
    else:
        target = request.getfixturevalue("redis_db").url
        store = RedisHistoryStore(target)
    store.open()
    store.advance_cycle()
    procs = [
        multiprocessing.get_context("spawn").Process(target=_hammer, args=(target, w, 300))
        for w in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    log = store.visit_log()
    assert len(log["url_id"]) == 1200
    arr = store.arrays()
    total_visits = 0
    for uid, n, x in zip(arr.ids, arr.columns["n"], arr.columns["X"], strict=True):
        mine = log["url_id"] == uid
        assert n == (log["changed"][mine] >= 0).sum()  # counters never ahead of (or behind) the log
        assert x == (log["changed"][mine] == 1).sum()
        total_visits += mine.sum()
    assert total_visits == 1200 and len(store) == 5
    store.close()


def test_log_cap_trims_oldest(redis_db):
    with RedisHistoryStore(redis_db.url, log_maxlen=1000) as s:
        for i in range(3000):
            s.record(visit(fp=(i % 50).to_bytes(20, "big"), t=float(i)))
        n = len(s.visit_log()["url_id"])
        assert 1000 <= n < 3000  # approximate trimming (MAXLEN ~), by whole nodes


def test_unreachable_redis_names_the_url():
    port = free_port()
    store = RedisHistoryStore(f"redis://:secret@127.0.0.1:{port}/3")
    with pytest.raises(HistoryStoreError, match=rf"redis://:\*\*\*@127\.0\.0\.1:{port}/3") as err:
        store.open()
    assert "secret" not in str(err.value)
    with pytest.raises(HistoryStoreError, match="not open"):
        store.record(visit())


def test_newer_schema_is_refused(redis_db):
    redis_db.client().hset("recrawl:meta", "schema_version", 99)
    with pytest.raises(HistoryStoreError, match="schema version 99.*newer"):
        RedisHistoryStore(redis_db.url).open()


def test_store_setting_dispatch(redis_db):
    s = open_store({"RECRAWL_STORE": redis_db.url, "RECRAWL_REDIS_KEY": "other"})
    assert isinstance(s, RedisHistoryStore) and s.key == "other"
    assert s.location == redis_db.url
    # "redis", or no RECRAWL_STORE with RedisRecrawlScheduler: scrapy-redis's settings
    s = open_store({"RECRAWL_STORE": "redis", "REDIS_URL": redis_db.url}, "news")
    s.open()
    assert s.location == f"redis://127.0.0.1:{redis_db.port}/0"
    assert s.key == "news:history"  # one history per spider by default
    s.close()
    s = open_store(
        {
            "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
            "REDIS_HOST": "127.0.0.1",
            "REDIS_PORT": redis_db.port,
            "REDIS_PARAMS": {"db": 2},
            "RECRAWL_REDIS_KEY": "crawl:%(spider)s",
        },
        "blog",
    )
    assert isinstance(s, RedisHistoryStore) and s.key == "crawl:blog"
    assert s.location == f"redis://127.0.0.1:{redis_db.port}/2"
    # a key that names the spider, where none is known (an offline command without --spider)
    with pytest.raises(RecrawlSettingError, match=r"RECRAWL_REDIS_KEY=.*%\(spider\)s.*--spider"):
        open_store({"RECRAWL_STORE": redis_db.url})


def test_closed_store_and_redis_errors_are_history_store_errors(redis_db):
    s = RedisHistoryStore(redis_db.url)
    s.open()
    redis_db.client().set("{recrawl}:cycle", "not a number")
    with pytest.raises(HistoryStoreError, match="RECRAWL_STORE"):
        s.advance_cycle()
    s.close()


def test_a_url_new_to_two_processes_keeps_the_first_flushed_id(redis_db):
    """Visits are buffered: two processes that have not read a URL the store does not
    know each propose it new, with an id of their own reserved block, and read nothing;
    the first flush indexes it, the second folds its visit onto that URL. What record()
    returned is filled from the server's fold of each visit (looking at it flushes)."""
    a, b = RedisHistoryStore(redis_db.url), RedisHistoryStore(redis_db.url)
    a.open()
    b.open()
    fp = b"\x09" * 20
    ra = a.record(visit(fp=fp, t=1.0))
    rb = b.record(visit(fp=fp, t=2.0))
    assert isinstance(ra, PendingRecord) and a.buffered_visits == b.buffered_visits == 1
    assert (ra.id, ra.visits) == (rb.id, 1) and rb.visits == 2  # a's flush came first
    assert a.buffered_visits == b.buffered_visits == 0
    for store in (a, b):
        rec = store.get(fp)
        assert rec.id == ra.id and rec.visits == 2  # one URL, both visits
    assert len(a) == 1 and a.visit_log()["url_id"].tolist() == [ra.id, ra.id]
    assert b.record(visit(fp=fp, t=3.0)).id == ra.id  # the id it learnt
    a.close()
    b.close()


def test_a_failed_flush_keeps_the_buffer():
    """A flush that cannot reach Redis raises and keeps every buffered visit; the next
    one writes them (the store's contract: a failure keeps the buffer for a retry)."""
    from .redis_server import RedisServer

    with RedisServer(appendonly=True) as server:
        store = RedisHistoryStore(server.url, flush_every=100)
        store.open()
        store.record(visit(t=1.0))
        store.record(visit(fp=b"\x02" * 20, t=1.0))
        server.stop()
        try:
            with pytest.raises(HistoryStoreError, match="cannot"):
                store.flush()
            assert store.buffered_visits == 2
        finally:
            server.start()
        store.flush()
        assert store.buffered_visits == 0 and len(store) == 2
        store.close()


def test_record_returns_the_fold_the_server_made_and_batches_stay_in_flight(redis_db):
    """record() of a URL the process has not read reads nothing: its result is filled
    from the server's fold when its batch is answered; a full buffer is sent and its
    answer read at the next flush (one batch in flight), counted as buffered till then;
    a read of one of its URLs waits for it; what comes back is the SQLite store's."""
    s = RedisHistoryStore(redis_db.url, flush_every=4)
    s.open()
    ref = SqliteHistoryStore(":memory:")
    ref.open()
    fps = [bytes([i]) * 20 for i in range(3)]
    results = []
    for t in range(10):
        v = visit(fp=fps[t % 3], t=float(t), changed=bool(t % 2) if t >= 3 else None)
        theirs = ref.record(v)  # the SQLite store's record (a live object: its numbers now)
        numbers = (theirs.visits, theirs.n, theirs.X, theirs.sad, theirs.gad, theirs.aad_sum)
        results.append((s.record(v), numbers))
        assert s.buffered_visits <= 8  # the buffer, and one batch in flight
    assert s._writer.inflight is not None  # the last full batch: sent, not yet answered
    got = s.get(fps[0])  # waits for it, and flushes the rest
    assert s.buffered_visits == 0
    assert (got.visits, got.n, got.X) == (4, 3, ref.get(fps[0]).X)
    for mine, numbers in results:  # each as its own visit made it, looked at later
        assert (mine.visits, mine.n, mine.X, mine.sad, mine.gad, mine.aad_sum) == numbers
    plain = copy.copy(results[0][0])
    assert type(plain) is UrlRecord and plain == results[0][0]
    s.close()
    ref.close()


def test_a_request_over_64_kb_is_kept_beside_the_blobs_and_read_back(store):
    """A URL's blob of BIG_BLOB bytes or more (a long POST body) lives in the shard's
    ``bigreq`` hash, not in its blobs string; it is read back, kept while the same, and
    replaced by a small one (both scripts read it through the one Lua function)."""
    big = {"url": "https://example.com/a", "method": "POST", "body": b"x" * 70_000}
    small = {"url": "https://example.com/a", "callback": "parse"}
    store.record(visit(request=big))
    store.record(visit(t=1001.0, changed=False))  # no request: the stored one stays
    uid = store.get(FP).id
    bigreq = store.layout.shard(0, "bigreq")
    assert store.client.hexists(bigreq, uid)
    assert store.requests([uid])[0]["body"] == big["body"]
    store.record(visit(t=1002.0, changed=True, request=small))
    assert store.requests([uid])[0]["callback"] == "parse"
    assert not store.client.hexists(bigreq, uid)
    assert store.get(FP).url == "https://example.com/a"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"REDIS_URL": "http://u:pw@h:6379/0"}, "REDIS_URL='http://u:***@h:6379/0'"),
        ({"REDIS_PARAMS": {"url": "localhost:6379"}}, "REDIS_PARAMS['url']='localhost:6379'"),
    ],
)
def test_a_redis_url_of_another_scheme_is_refused_naming_where_it_came_from(settings, named):
    from scrapy.settings import Settings

    from scrapy_recrawl.history.redis_connection import redis_location
    from scrapy_recrawl.settings import RecrawlSettingError

    with pytest.raises(RecrawlSettingError) as err:
        redis_location(Settings(settings))
    assert str(err.value).startswith(f"{named}: a Redis URL starts with redis://, rediss://")
    assert "pw" not in str(err.value)


# -- the store contract's members (issue 30: history/base.py) ---------------------------


def test_the_store_declares_what_the_crawl_reads(redis_db):
    s = RedisHistoryStore(redis_db.url, key="books:history", store_bodies=False)
    assert s.label == "books:history" and s.capabilities == frozenset({"fenced"})
    assert s.read_only is False and s.store_bodies is False
    with s:
        assert s.buffered_visits == 0 and s.unreadable_values == 0
        s.record(visit())
        assert s.buffered_visits == 1
        s.flush()
        assert s.buffered_visits == 0
        # the "fenced" members: epoch, its check, the loss hook, the lease
        assert s.epoch and s.on_lost is None
        s.check_epoch()
        holder = s.hold(30)
        assert set(s.holders(30)) == {holder}


def test_urls_of_an_unknown_id_is_a_key_error_and_clear_leaves_no_owner(store):
    store.record(visit())
    uid = store.get(FP).id
    assert store.urls([uid]) == ["https://example.com/a"]
    with pytest.raises(KeyError, match=r"no URL ids \[99\]"):
        store.urls([uid, 99])
    store.claim("books")
    assert store.owner() == "books"
    store.clear()
    assert store.owner() is None and len(store) == 0


def test_a_store_on_plain_connection_arguments_imports_no_scrapy(redis_db):
    """history/ connects from plain redis-py arguments: neither Scrapy, scrapy-redis nor
    Twisted is imported to open, write and read a store (issue 30, item 5)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    code = (
        "import sys\n"
        "from scrapy_recrawl.history.base import Visit\n"
        "from scrapy_recrawl.history.redis import RedisHistoryStore\n"
        f"s = RedisHistoryStore(connection={{'url': {redis_db.url!r}}}, key='plain')\n"
        "s.open(); s.record(Visit(b'x' * 20, 'http://h/', 1.0, 200)); s.flush()\n"
        "assert len(s) == 1 and s.urls([s.get(b'x' * 20).id]) == ['http://h/']\n"
        "s.close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('scrapy', 'scrapy_redis', 'twisted')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
