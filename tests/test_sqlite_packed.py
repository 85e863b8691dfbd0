"""The SQLite store's packed scoring columns (history/sqlite_packed.py, schema 9) always
equal the urls table: after a random mix of every write the store makes (new URLs past
the last block, revisits, 304s, failures, gone URLs, observations that leave D/A/R/M
NULL, flushes at random points, cycles, reopening, compact, clear), arrays() read from
the packed table equals the plain SELECT of the urls table (the read before schema 9,
kept as SqliteReader._arrays_from_urls), on a new store and on one migrated from
v0.1.0's (tests/fixtures/store_v8.sqlite3)."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit, sqlite_packed

FIXTURES = Path(__file__).parent / "fixtures"


def _same(store: SqliteHistoryStore) -> int:
    packed, oracle = store.arrays(), store._arrays_from_urls()
    np.testing.assert_array_equal(packed.ids, oracle.ids)
    assert sorted(packed.columns) == sorted(oracle.columns)
    for name, col in oracle.columns.items():
        assert packed.columns[name].dtype == col.dtype, name
        np.testing.assert_array_equal(packed.columns[name], col, err_msg=name)
    assert packed.cycle == oracle.cycle
    return len(packed)


def _visit(rng: random.Random, u: int, t: float) -> Visit:
    fp, url = u.to_bytes(20, "big"), f"http://h{u % 7}/{u}"
    kind = rng.random()
    if kind < 0.1:
        return Visit(fp, url, t, 0)  # a failed download
    if kind < 0.15:
        return Visit(fp, url, t, 404, gone=True)
    if kind < 0.25:
        return Visit(fp, url, t, 304, False)
    changed = rng.choice([None, True, False])
    return Visit(
        fp,
        url,
        t,
        200,
        changed,
        signature=rng.randbytes(8),
        distance=rng.randrange(40),
        added=rng.randrange(5),
        removed=rng.randrange(5),
        modified=rng.randrange(3),
        request={"url": url},
    )


def _mix(path: Path, seed: int, urls: int, steps: int) -> None:
    rng = random.Random(seed)
    store = SqliteHistoryStore(path, flush_every=rng.choice([1, 7, 50]), log_maxlen=300)
    store.open()
    t = 1000.0
    try:
        for _ in range(steps):
            op = rng.random()
            t += 1
            if op < 0.8:
                store.record(_visit(rng, rng.randrange(urls), t))
            elif op < 0.88:
                store.flush()
            elif op < 0.94:
                store.advance_cycle()
            elif op < 0.96:
                _same(store)  # a read in the middle (it flushes)
            elif op < 0.98:
                store.close()
                store.open()
            elif op < 0.99:
                store.compact()
            elif rng.random() < 0.3:
                store.clear()
                assert store.db.execute("SELECT COUNT(*) FROM packed").fetchone() == (0,)
        assert _same(store) == len(store)
    finally:
        store.close()
    with SqliteHistoryStore(path) as again:  # what was written, read afresh
        _same(again)
    with SqliteHistoryStore(path, read_only=True) as reader:
        _same(reader)


@pytest.mark.parametrize("seed", range(4))
def test_the_packed_columns_equal_the_urls_table_on_a_new_store(tmp_path, seed):
    _mix(tmp_path / "h.sqlite3", seed, urls=400, steps=2500)


@pytest.mark.parametrize("seed", range(2))
def test_the_packed_columns_equal_the_urls_table_on_a_migrated_store(tmp_path, seed):
    path = tmp_path / "h.sqlite3"
    shutil.copy(FIXTURES / "store_v8.sqlite3", path)
    _mix(path, seed, urls=200, steps=1500)


def test_a_url_never_recorded_in_a_block_reads_as_absent(tmp_path):
    """ids with gaps (a store written by hand, a bulk build): the gaps are no URLs."""
    path = tmp_path / "h.sqlite3"
    with SqliteHistoryStore(path) as store:
        for u in range(3):
            store.record(Visit(bytes([u]) * 20, f"http://h/{u}", 1.0, 200))
    db = sqlite3.connect(path)
    db.execute("UPDATE urls SET id = id * 40")  # 40, 80, 120: blocks 1, 2, 3
    sqlite_packed.rebuild(db)
    db.commit()
    db.close()
    with SqliteHistoryStore(path) as store:
        assert store.arrays().ids.tolist() == [40, 80, 120]
        assert store.db.execute("SELECT block FROM packed ORDER BY block").fetchall() == [
            (1,),
            (2,),
            (3,),
        ]
        _same(store)


def test_the_packed_copy_is_written_with_the_urls_rows_or_not_at_all(tmp_path):
    """A flush that fails after the packed write leaves neither (one transaction)."""
    path = tmp_path / "h.sqlite3"
    with SqliteHistoryStore(path) as store:
        store.record(Visit(b"a" * 20, "http://h/a", 1.0, 200))
        store.flush()
        store.db.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON visits BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
        store.record(Visit(b"b" * 20, "http://h/b", 2.0, 200))
        with pytest.raises(Exception, match="boom"):
            store.flush()
        store.db.execute("DROP TRIGGER boom")
        blocks = store.db.execute("SELECT data FROM packed").fetchall()
        recs = np.frombuffer(b"".join(b for (b,) in blocks), dtype=sqlite_packed.RECORD)
        assert int(recs["present"].sum()) == 1  # b's record not in the packed table
        store.flush()  # the buffer kept: written now, both
        assert _same(store) == 2
