"""How long the SQLite visit log is kept, and what a cycle reads of it (schema version 7).

The log is capped (RECRAWL_SQLITE_LOG_MAXLEN): the oldest visits go, every URL's
record stays whole, its change window included (each row keeps it: ``change_window()``
reads no log). ``visit_log(since_cycle=...)`` searches the log's index on cycle.
All on real SQLite files.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.history import (
    SqliteHistoryStore,
    Visit,
    open_store,
)
from scrapy_recrawl.history.records import window_from_log
from scrapy_recrawl.settings import RecrawlSettingError

#: the record columns of the urls table a trim must leave as they are
_RECORD = (
    "id, fingerprint, url, first_seen, first_cycle, visits, n, x, sad, aad_sum, gad, "
    "last_visit_cycle, last_visit_time, last_change_cycle, last_change_time, d, a, r, m, "
    "status, gone, etag, last_modified, has_body, failures, last_failure_cycle, cwin"
)


def _crawl(store: SqliteHistoryStore, cycles: int, urls: int, seed: int = 0) -> None:
    """``cycles`` cycles of uneven visits: each URL fetched with its own chance, some
    failed downloads, 304s, first fetches (no observation), changes at random."""
    rng = np.random.default_rng(seed)
    chance = rng.uniform(0.2, 1.0, urls)
    for _ in range(cycles):
        store.advance_cycle()
        for u in np.flatnonzero(rng.random(urls) < chance):
            fp, url = int(u).to_bytes(20, "big"), f"http://h/{u}"
            roll = rng.random()
            if roll < 0.08:
                store.record(Visit(fp, url, float(store.cycle), 0))  # a failed download
            elif roll < 0.2:
                store.record(Visit(fp, url, float(store.cycle), 304, False))
            else:
                store.record(Visit(fp, url, float(store.cycle), 200, bool(rng.random() < 0.4)))


def _records(path: Path) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT {_RECORD} FROM urls ORDER BY id").fetchall()  # noqa: S608
    finally:
        db.close()


def test_the_cap_keeps_the_newest_visits_and_every_record_whole(tmp_path, caplog):
    whole = SqliteHistoryStore(tmp_path / "whole.sqlite3", flush_every=7, log_maxlen=0)
    capped = SqliteHistoryStore(tmp_path / "capped.sqlite3", flush_every=7, log_maxlen=100)
    with caplog.at_level(logging.INFO, "scrapy_recrawl.history"):
        for store in (whole, capped):
            with store:
                _crawl(store, cycles=30, urls=40)
    with whole, capped:
        full, kept = whole.visit_log(), capped.visit_log()
        assert len(full["url_id"]) > 500
        assert len(kept["url_id"]) == 100  # exactly the cap
        for name in full:  # the newest 100, as they were
            np.testing.assert_array_equal(kept[name], full[name][-100:])
        ids = whole.arrays().ids
        np.testing.assert_array_equal(
            capped.change_window(ids, 5), whole.change_window(ids, 5)
        )  # the window is the record's, not the log's
        assert capped.trimmed_visits == len(full["url_id"]) - 100
    # every URL's record as the uncapped store has it, byte for byte
    assert _records(tmp_path / "capped.sqlite3") == _records(tmp_path / "whole.sqlite3")
    said = [r.getMessage() for r in caplog.records if "RECRAWL_SQLITE_LOG_MAXLEN" in r.getMessage()]
    assert len(said) == 1 and "capped.sqlite3" in said[0]  # once, naming the store


def test_a_lowered_cap_trims_at_the_next_write_and_compact_shrinks_the_file(tmp_path):
    path = tmp_path / "history.sqlite3"
    with SqliteHistoryStore(path, log_maxlen=0) as store:
        _crawl(store, cycles=40, urls=200)
        total = len(store.visit_log()["url_id"])
    big = path.stat().st_size
    with SqliteHistoryStore(path, log_maxlen=500) as store:
        dropped, before, after = store.compact()
        assert dropped == total - 500 and len(store.visit_log()["url_id"]) == 500
        assert before >= big and after < before / 2  # the freed pages given back
        assert store.compact() == (0, after, after)  # at the cap: nothing more
    with SqliteHistoryStore(path, log_maxlen=100) as store:
        store.advance_cycle()
        store.record(Visit(b"\1" * 20, "http://h/new", 1.0, 200))
        store.flush()  # the first write under the new cap trims to it
        assert len(store.visit_log()["url_id"]) == 100


def test_the_setting_reaches_the_store_and_a_bad_value_is_refused_by_name(tmp_path):
    store = open_store({"RECRAWL_STORE": str(tmp_path / "h.sqlite3")})
    assert store.log_maxlen == 10_000_000  # sized like RECRAWL_REDIS_LOG_MAXLEN
    store = open_store(
        {"RECRAWL_STORE": str(tmp_path / "h.sqlite3"), "RECRAWL_SQLITE_LOG_MAXLEN": "2000"}
    )
    assert store.log_maxlen == 2000
    with pytest.raises(RecrawlSettingError, match="RECRAWL_SQLITE_LOG_MAXLEN=-1"):
        open_store({"RECRAWL_STORE": "h.sqlite3", "RECRAWL_SQLITE_LOG_MAXLEN": -1})


def test_the_last_cycles_are_read_through_the_index_on_cycle(tmp_path):
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        _crawl(store, cycles=12, urls=30)
        # a response of cycle 3 recorded late, after cycle 12's: in the range read, left out
        store.record(Visit(b"\0" * 20, "http://h/0", 99.0, 200, True, cycle=3))
        statements: list[str] = []
        store.db.set_trace_callback(statements.append)
        recent = store.visit_log(since_cycle=10)
        none = store.visit_log(since_cycle=13)
        store.db.set_trace_callback(None)
        full = store.visit_log()
        plans = {
            sql: " ".join(row[3] for row in store.db.execute("EXPLAIN QUERY PLAN " + sql))
            for sql in statements
            if "FROM visits" in sql and not sql.startswith("INSERT")
        }
    reads = [plan for sql, plan in plans.items() if sql.startswith("SELECT url_id")]
    firsts = [plan for sql, plan in plans.items() if sql.startswith("SELECT MIN(id)")]
    trims = [plan for sql, plan in plans.items() if sql.startswith("SELECT (SELECT MIN(id)")]
    assert len(reads) == len(firsts) == 2 and trims, plans
    # the first visit of the cycles from the index's entries, then a range of the table
    assert all("USING COVERING INDEX visits_by_cycle (cycle>?)" in p for p in firsts)
    assert all("USING INTEGER PRIMARY KEY (rowid>?)" in p for p in reads)
    # nothing scans the log: neither these reads nor the cap's look-ups in the flush
    assert not any("SCAN visits" in plan for plan in plans.values()), plans
    keep = full["cycle"] >= 10
    assert 0 < keep.sum() < len(keep) and full["cycle"][-1] == 3
    for name in full:  # the same rows, in the same (log) order, as a filtered full read
        np.testing.assert_array_equal(recent[name], full[name][keep])
    assert len(none["url_id"]) == 0


@pytest.mark.parametrize("window", [1, 3, 5])
def test_change_window_equals_the_old_computation_over_the_whole_log(tmp_path, window):
    with SqliteHistoryStore(tmp_path / "history.sqlite3", flush_every=13, log_maxlen=0) as store:
        _crawl(store, cycles=25, urls=60, seed=window)
        ids = store.arrays().ids
        log = store.visit_log()
        old = window_from_log(ids, log["url_id"], log["changed"], window)
        # windows to compare, not only NaN: changed and unchanged in them
        assert np.isfinite(old).sum() > 0.9 * old.size and {0.0, 1.0} <= set(old.ravel())
        np.testing.assert_array_equal(store.change_window(ids, window), old)
        few = ids[::7]  # a few ids, read by id, in any order
        np.testing.assert_array_equal(store.change_window(few[::-1], window), old[::7][::-1])
        unknown = np.array([10_000])
        assert np.isnan(store.change_window(unknown, window)).all()
