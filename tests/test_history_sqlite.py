"""The SQLite history store, on real files: state, batching, reopen, bad input."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from scrapy_recrawl.history import HistoryStoreError, SqliteHistoryStore, Visit
from scrapy_recrawl.history.state import observe, observe_one
from scrapy_recrawl.settings import RecrawlSettingError
from scrapy_recrawl.stores import open_store

FP = b"\x01" * 20


def visit(status=200, changed=None, t=1000.0, fp=FP, **kw):
    return Visit(
        fingerprint=fp, url="https://example.com/a", time=t, status=status, changed=changed, **kw
    )


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "h" / "history.sqlite3")


def test_new_store_starts_at_cycle_zero_and_counts_cycles(path):
    with SqliteHistoryStore(path) as store:
        assert store.cycle == 0
        assert store.advance_cycle() == 1
        assert store.advance_cycle() == 2
    with SqliteHistoryStore(path) as store:
        assert store.cycle == 2


def test_estimators_follow_the_observation_sequence(path):
    seq = [1, 0, 1, 1, 0]
    with SqliteHistoryStore(path, flush_every=2) as store:
        store.advance_cycle()
        store.record(visit(signature=b"sig0"))  # first fetch: no observation
        for i, c in enumerate(seq):
            store.advance_cycle()
            store.record(
                visit(changed=bool(c), t=2000.0 + i, distance=5 * c, added=c, modified=2 * c)
            )
        rec = store.get(FP)
    state = (0, 0, 0.0, 0.0, 0.0)
    for c in seq:
        state = observe(*state, c)
    assert (rec.n, rec.X) == (5, 3)
    assert (rec.sad, rec.aad_sum, rec.gad) == pytest.approx(state[2:])
    # AAD = sum(i I_i) / sum(i) = (1 + 3 + 4) / 15
    assert rec.aad_sum / 15 == pytest.approx(8 / 15)
    assert rec.last_change_cycle == 5 and rec.last_visit_cycle == 6
    assert (rec.D, rec.A, rec.R, rec.M) == (0.0, 0.0, 0.0, 0.0)
    assert rec.visits == 6 and rec.signature == b"sig0"


def test_gad_recursion_equals_direct_formula_and_stays_finite():
    rng = np.random.default_rng(3)
    ind = rng.integers(0, 2, 60)
    state = (0, 0, 0.0, 0.0, 0.0)
    for n, c in enumerate(ind, start=1):
        state = observe(*state, int(c))
        w = 2.0 ** np.arange(n)
        assert state[4] == pytest.approx(float((w * ind[:n]).sum() / w.sum()), rel=1e-12)
    state = (0, 0, 0.0, 0.0, 0.0)
    for _ in range(10_000):
        state = observe(*state, 1)
    assert state[4] == pytest.approx(1.0) and np.isfinite(state[3])


def test_errors_and_gone_are_not_observations(path):
    with SqliteHistoryStore(path) as store:
        store.advance_cycle()
        store.record(visit())
        store.advance_cycle()
        store.record(visit(status=503, changed=True))
        store.record(visit(status=0, changed=True))
        rec = store.record(visit(status=404, gone=True))
        assert rec.n == 0 and rec.gone and rec.status == 404
        rec = store.record(visit(status=200, changed=False))
        assert rec.n == 1 and not rec.gone
        log = store.visit_log()
    assert log["status"].tolist() == [200, 503, 0, 404, 200]
    assert log["changed"].tolist() == [-1, -1, -1, -1, 0]


def test_validators_304_keeps_what_it_omits(path):
    with SqliteHistoryStore(path) as store:
        store.record(visit(etag='"v1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT"))
        rec = store.record(visit(status=304, changed=False, etag='"v1"'))
        assert rec.last_modified == "Mon, 01 Jan 2024 00:00:00 GMT"
        rec = store.record(visit(status=200, changed=True))
        assert rec.etag is None and rec.last_modified is None


def test_everything_survives_a_reopen_in_another_process(path):
    body = "<html><body><p>héllo</p></body></html>".encode()
    with SqliteHistoryStore(path, flush_every=10_000, flush_seconds=3600) as store:
        store.advance_cycle()
        store.record(
            visit(
                etag='"e"',
                signature=b"\x00sig",
                body=body,
                headers={"Content-Type": ["text/html; charset=utf-8"]},
                request={
                    "url": "https://example.com/a",
                    "callback": "parse_item",
                    "meta": {"k": 1},
                },
            )
        )
        store.advance_cycle()
        store.record(visit(status=304, changed=False))
        # nothing flushed explicitly: close() must write the buffer
    code = textwrap.dedent(
        f"""
        from scrapy_recrawl.history import SqliteHistoryStore
        s = SqliteHistoryStore({path!r}); s.open()
        r = s.get({FP!r})
        b = s.body({FP!r})
        print(s.cycle, len(s), r.n, r.X, r.etag, r.signature, b.body.decode(), b.headers["Content-Type"][0],
              s.requests([r.id])[0]["callback"])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "2",
        "1",
        "1",
        "0",
        '"e"',
        "b'\\x00sig'",
        "<html><body><p>héllo</p></body></html>",
        "text/html;",
        "charset=utf-8",
        "parse_item",
    ]


def test_arrays_are_columns_in_id_order_with_nan_for_unrecorded(path):
    with SqliteHistoryStore(path) as store:
        store.advance_cycle()
        for i in range(5):
            store.record(visit(fp=bytes([i]) * 20, t=float(i)))
        store.advance_cycle()
        store.record(visit(fp=bytes([2]) * 20, changed=True, distance=7))
        arr = store.arrays()
    assert len(arr) == 5 and arr.cycle == 2
    assert arr.ids.tolist() == [1, 2, 3, 4, 5]
    assert arr.columns["n"].tolist() == [0, 0, 1, 0, 0]
    assert arr.columns["X"].tolist() == [0, 0, 1, 0, 0]
    assert arr.columns["last_visit_cycle"].tolist() == [1, 1, 2, 1, 1]
    assert np.isnan(arr.columns["D"][[0, 1, 3, 4]]).all() and arr.columns["D"][2] == 7
    assert arr.columns["last_visit_time"][0] == 0.0


def test_arrays_read_block_by_block_are_the_rows(path, monkeypatch):
    from scrapy_recrawl.history import sqlite_reader as sqlite_module

    with SqliteHistoryStore(path) as store:
        store.advance_cycle()
        for i in range(23):
            store.record(visit(fp=i.to_bytes(20, "big"), t=1000.0 + i))
        store.advance_cycle()
        for i in range(0, 23, 3):
            store.record(visit(fp=i.to_bytes(20, "big"), changed=i % 2 == 0, distance=i, t=2e3))
        whole = store.arrays()
        monkeypatch.setattr(sqlite_module, "_ARRAY_BLOCK", 5)  # four blocks and a short one
        blocks = store.arrays()
    assert blocks.ids.tolist() == whole.ids.tolist() == list(range(1, 24))
    assert blocks.columns.keys() == whole.columns.keys()
    for name, col in blocks.columns.items():
        assert col.dtype == whole.columns[name].dtype and col.flags.c_contiguous
        assert np.array_equal(col, whole.columns[name], equal_nan=True), name
    assert blocks.columns["n"].tolist() == [int(i % 3 == 0) for i in range(23)]
    assert blocks.columns["D"][3] == 3 and np.isnan(blocks.columns["D"][1])


def test_requests_come_back_in_the_order_asked(path):
    with SqliteHistoryStore(path) as store:
        for i in range(2000):  # over sqlite's bound-parameter limit
            store.record(visit(fp=i.to_bytes(20, "big"), request={"url": f"u{i}"}))
        got = store.requests([1500, 3, 99999])
    assert [g and g["url"] for g in got] == ["u1499", "u2", None]


def test_newer_schema_is_refused_naming_the_store(path):
    with SqliteHistoryStore(path):
        pass
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(HistoryStoreError, match="schema version 99.*newer"):
        SqliteHistoryStore(path).open()


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HistoryStoreError, match=r"junk\.sqlite3.*RECRAWL_STORE"):
        SqliteHistoryStore(junk).open()
    other = tmp_path / "other.sqlite3"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE x (y)")
    db.close()
    with pytest.raises(HistoryStoreError, match="not a scrapy-recrawl history store"):
        SqliteHistoryStore(other).open()


def test_unwritable_store_keeps_its_buffer_and_retries(path):
    store = SqliteHistoryStore(path, flush_every=10_000, flush_seconds=3600)
    store.open()
    store.record(visit(request={"url": "https://example.com/a"}))
    # another connection holds the write lock: our flush must fail clearly...
    blocker = sqlite3.connect(path, isolation_level=None)
    store.db.execute("PRAGMA busy_timeout=50")
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(HistoryStoreError, match="cannot write.*RECRAWL_STORE"):
        store.flush()
    blocker.execute("ROLLBACK")
    blocker.close()
    # ...and lose nothing: the retry writes the buffered visit
    store.flush()
    store.close()
    with SqliteHistoryStore(path) as again:
        assert len(again) == 1 and again.visit_log()["status"].tolist() == [200]


def test_closed_store_says_so(path):
    store = SqliteHistoryStore(path)
    with pytest.raises(HistoryStoreError, match="not open"):
        store.record(visit())


def test_unpicklable_request_keeps_the_previous_one(path):
    with SqliteHistoryStore(path) as store:
        rec = store.record(visit(request={"url": "u"}))
        store.flush()
        store.record(visit(request={"url": "u", "meta": {"f": lambda: 1}}))
        assert store.requests([rec.id]) == [{"url": "u"}]


def test_store_setting_is_parsed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert open_store({"RECRAWL_STORE": "sqlite:///rel.sqlite3"}).path == "rel.sqlite3"
    assert open_store({"RECRAWL_STORE": f"sqlite:///{tmp_path}/a.db"}).path == f"{tmp_path}/a.db"
    assert open_store({"RECRAWL_STORE": tmp_path / "b.db"}).path == os.fspath(tmp_path / "b.db")
    with pytest.raises(RecrawlSettingError, match="RECRAWL_STORE='ftp://x'.*unknown store scheme"):
        open_store({"RECRAWL_STORE": "ftp://x"})
    with pytest.raises(RecrawlSettingError, match="RECRAWL_FLUSH_EVERY=0"):
        open_store({"RECRAWL_STORE": "x.db", "RECRAWL_FLUSH_EVERY": 0})


@pytest.mark.parametrize("changed", [0, 1])
def test_observe_one_is_observe_of_one_url(changed):
    """The store folds each visit with observe_one (observe of plain numbers): bit for bit
    the array form's doubles, also where 2 ** (1 - n) is subnormal or 0 (n past 1,074)."""
    rng = np.random.default_rng(7)
    for n in [0, 1, 2, 3, 10, 100, 1073, 1074, 1075, 1076, 5000, *rng.integers(0, 3000, 200)]:
        n = int(n)
        args = (n, n // 2, float(changed), float(rng.random() * n * n), float(rng.random()))
        arrays = observe(*(np.array([a]) for a in args), np.array([changed]))
        got = observe_one(*args, changed)
        assert [type(v) for v in got] == [int, int, float, float, float]
        assert [float(v).hex() for v in got] == [float(a[0]).hex() for a in arrays], n
        assert observe(*args, changed) == got  # the scalar form is observe_one
