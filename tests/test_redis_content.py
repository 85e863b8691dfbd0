"""Content-aware prediction (paper 004) on the Redis history store, against a real
redis-server: the bags of words, the C* / D* window columns and Q give the same
numbers as on the SQLite store for the same visits; a Redis gone away is a clear
error naming the settings."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scrapy_recrawl.change.bow import Bag, bag_from_text
from scrapy_recrawl.content import window as win
from scrapy_recrawl.content.store import BagStore, ContentColumns, ContentSettings
from scrapy_recrawl.history import HistoryStoreError, SqliteHistoryStore, Visit
from scrapy_recrawl.history.records import window_from_log
from scrapy_recrawl.history.redis import RedisHistoryStore

from . import test_redis_store as store_tests
from .redis_server import RedisServer
from .test_redis_store import _random_visits

store = store_tests.store  # an open RedisHistoryStore on an empty database

ALL = set(win.c_names() + win.d_names()) | {"Q"}


def _bags(seed: int, count: int) -> list[Bag]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(60)]
    return [
        bag_from_text(" ".join(rng.choices(vocab, k=rng.randrange(0, 80))), max_terms=16)
        for _ in range(count)
    ]


def test_bag_store_keeps_the_same_bags_and_distances(store, tmp_path):
    with SqliteHistoryStore(tmp_path / "h.sqlite3") as sqlite:
        for keep, window in ((1, 3), (3, 3), (5, 5)):
            a, b = BagStore(store, keep=keep, window=window), BagStore(sqlite, keep, window)
            for i, bag in enumerate(_bags(keep, 40)):
                url_id = 100 * keep + i % 4
                da = a.update(url_id, bag, a.bags(url_id))
                db = b.update(url_id, bag, b.bags(url_id))
                np.testing.assert_array_equal(da, db)
                assert a.bags(url_id) == b.bags(url_id)
                assert len(a.bags(url_id)) <= keep
            ids = np.arange(100 * keep - 1, 100 * keep + 6)
            np.testing.assert_array_equal(a.d_columns(ids), b.d_columns(ids))
    # one hash each, id -> bytes, under the store's prefix
    client = store.client
    assert client.hlen("{recrawl}:side:content_bags") == 12
    assert client.hlen("{recrawl}:side:content_dists") == 12


def _replay(stores, seed):
    """The same random visits into each store; a bag for each good HTML-like visit."""
    bag_stores = [BagStore(s, keep=5, window=5) for s in stores]
    bags = _bags(seed, 400)
    for i, (advance, v) in enumerate(_random_visits(seed, urls=12, count=400)):
        if advance:
            assert len({s.advance_cycle() for s in stores}) == 1
        recs = [s.record(v) for s in stores]
        assert len({r.id for r in recs}) == 1
        if 200 <= v.status < 300 and i % 5:
            for b in bag_stores:
                b.update(recs[0].id, bags[i])
    for s in stores:
        s.flush()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_window_columns_and_q_equal_sqlite(store, tmp_path, seed):
    sqlite = SqliteHistoryStore(tmp_path / "h.sqlite3", flush_every=7)
    sqlite.open()
    _replay([store, sqlite], seed)
    cfg = ContentSettings(window=5, experts=4, history=40, candidates=8, same_host=False)
    got = ContentColumns(store, cfg, ALL).columns(store.arrays())
    want = ContentColumns(sqlite, cfg, ALL).columns(sqlite.arrays())
    assert set(got) == set(want) == ALL
    for name in sorted(ALL):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # not all NaN / zero: the comparison means something
    assert np.isfinite(want["C3"]).sum() > 3 and np.isfinite(want["D2"]).sum() > 3
    assert (want["Q"] > 0).any()
    # the C window in the rows equals the one read from the log
    ids = store.arrays().ids
    log = store.visit_log()
    np.testing.assert_array_equal(
        store.change_window(ids, 5), window_from_log(ids, log["url_id"], log["changed"], 5)
    )
    sqlite.close()


def test_q_reads_only_the_last_cycles_of_the_log(store):
    rng = np.random.default_rng(0)
    for cycle in range(12):
        for u in range(6):
            changed = None if cycle == 0 else bool(rng.integers(0, 2))
            store.record(
                Visit(u.to_bytes(20, "big"), f"http://h{u % 2}/{u}", float(cycle), 200, changed)
            )
        store.advance_cycle()
    log = store.visit_log(since_cycle=8)
    assert log["cycle"].min() == 8 and log["cycle"].max() == 11
    assert len(log["url_id"]) == 4 * 6
    assert len(store.visit_log(since_cycle=100)["url_id"]) == 0
    assert len(store.visit_log(since_cycle=0)["url_id"]) == 12 * 6


def test_rows_written_before_the_window_was_kept_have_none(store):
    fp = b"\x07" * 20
    store.record(Visit(fp, "http://h/a", 0.0, 200))
    for changed in (True, False, True):
        store.record(Visit(fp, "http://h/a", 1.0, 200, changed=changed))
    np.testing.assert_array_equal(store.change_window([1], 5)[0], [1, 0, 1, np.nan, np.nan])
    # an older row has cwin = 0: no window (NaN), never "unchanged"
    # (one shard: URL id 1 is the first row of {recrawl#0}:rows)
    size = store.rows()[0].dtype.itemsize
    row = bytearray(store.client.getrange("{recrawl#0}:rows", 0, size - 1))
    off = store.rows()[0].dtype.fields["cwin"][1]
    row[off] = 0
    store.client.setrange("{recrawl#0}:rows", 0, bytes(row))
    assert np.isnan(store.change_window([1], 5)).all()
    store.record(Visit(fp, "http://h/a", 2.0, 200, changed=False))
    np.testing.assert_array_equal(store.change_window([1], 3)[0], [0, np.nan, np.nan])


def test_redis_gone_is_a_clear_error_naming_the_settings(tmp_path):
    with RedisServer() as server:
        s = RedisHistoryStore(server.url)
        s.open()
        bags = BagStore(s, keep=3)
        s.record(Visit(b"\x01" * 20, "http://h/a", 0.0, 200))
        bags.update(1, bag_from_text("a b c"))
        server.stop()
        with pytest.raises(HistoryStoreError, match=r"RECRAWL_STORE.*RECRAWL_CHANGE_TEST") as e:
            bags.bags(1)
        assert server.url in str(e.value)
        with pytest.raises(HistoryStoreError, match="RECRAWL_CHANGE_TEST"):
            bags.update(1, bag_from_text("a b"))
        cols = ContentColumns(s, ContentSettings(history=6), {"Q"})
        with pytest.raises(HistoryStoreError, match="RECRAWL_EXPERTS_HISTORY"):
            cols.observations(np.array([1]), 3)


def test_columns_extend_the_index_for_new_urls(tmp_path):
    """New URLs are added to the related-page index in place (RelatedIndex.extend)."""
    with SqliteHistoryStore(tmp_path / "h.sqlite3") as store:
        rng = np.random.default_rng(3)
        cfg = ContentSettings(experts=3, history=8, candidates=6)
        cols = ContentColumns(store, cfg, {"Q"})

        def cycle(urls: int) -> None:
            c = store.cycle
            for u in range(urls):
                changed = None if c == 0 else bool(rng.integers(0, 2))
                store.record(Visit(u.to_bytes(20, "big"), f"http://h{u % 3}/{u}", c, 200, changed))
            store.flush()
            store.advance_cycle()

        for _ in range(5):
            cycle(20)
        cols.columns(store.arrays())
        first = cols.index
        assert first is not None and len(first) == 20
        cycle(26)  # six new URLs, and every old one observed again
        arrays = store.arrays()
        cols.columns(arrays)
        assert cols.index is first and len(first) == 26  # extended in place
        hosts = np.arange(26) % 3  # same-host experts only (RECRAWL_EXPERTS_SAME_HOST)
        for r in range(26):
            assert (hosts[first.ids[r][first.ids[r] >= 0]] == hosts[r]).all()
        # the new URLs have no observation yet (first visits): no experts until refreshed
        assert (first.ids[20:] == -1).all() and (first.ids[:20] >= 0).any()
