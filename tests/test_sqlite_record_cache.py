"""The SQLite store's cache of records read from its file (sqlite_reader.get): what a
visit reads several times is read once, and never answers with a stale record."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.base import UrlRecord
from scrapy_recrawl.history.sqlite_schema import RECORD_FIELDS

FP = b"\x02" * 20
OTHER = b"\x03" * 20


def visit(fp=FP, t=1000.0, status=200, **kw):
    return Visit(fingerprint=fp, url="https://example.com/c", time=t, status=status, **kw)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "history.sqlite3")


class CountingStore(SqliteHistoryStore):
    """Counts the reads of a URL's row that reach the file."""

    reads = 0

    def _fetch(self, fingerprint, *, signature, **kw):
        self.reads += 1
        return super()._fetch(fingerprint, signature=signature, **kw)

    def _read(self, fn):
        self.file_reads = getattr(self, "file_reads", 0) + 1
        return super()._read(fn)


def test_a_visit_reads_the_record_from_the_file_once(path):
    with SqliteHistoryStore(path) as store:
        store.record(visit(signature=b"sig", body=b"<p>a</p>", etag='"e1"'))
    with CountingStore(path) as store:
        # the validators, the observer, the body and the record itself
        first = store.get(FP, signature=False)
        assert store.get(FP).signature == b"sig"  # read with its signature the first time
        assert store.body(FP).body == b"<p>a</p>"
        saved = store.record(visit(t=2000.0, status=304, changed=False))
        assert store.reads == 1
        # the record the callers hold stays the one before the visit
        assert (first.visits, first.last_visit_time) == (1, 1000.0)
        assert (saved.visits, saved.last_visit_time) == (2, 2000.0)
        assert saved is not first
        assert saved.signature == b"sig"
        # after the visit: its new record, before and after the flush
        assert store.get(FP).visits == 2
        store.flush()
        assert store.get(FP).visits == 2
        assert store.get(FP, signature=False).signature == b"sig"


def test_a_304_reads_the_file_once(path):
    """The record read for the validators brings the kept body with it: the 304's copy
    is no read of its own; after a visit's new body, the body read is the new one."""
    with SqliteHistoryStore(path) as store:
        store.record(visit(signature=b"sig", body=b"<p>a</p>", etag='"e1"'))
    with CountingStore(path) as store:
        assert store.get(FP, signature=False).has_body
        reads = store.file_reads
        assert store.body(FP).body == b"<p>a</p>"
        store.record(visit(t=2000.0, status=304, changed=False))
        assert store.body(FP).body == b"<p>a</p>"
        assert store.file_reads == reads
        store.record(visit(t=3000.0, body=b"<p>b</p>", changed=True))
        assert store.body(FP).body == b"<p>b</p>"
        store.flush()
        assert store.body(FP).body == b"<p>b</p>"


def test_an_unknown_url_read_then_recorded_is_known(path):
    with SqliteHistoryStore(path) as store:
        store.record(visit())  # a file with a URL: an unknown one is asked of the file
    with CountingStore(path) as store:
        assert store.get(OTHER) is None
        assert store.get(OTHER, signature=False) is None
        assert store.reads == 1
        rec = store.record(visit(fp=OTHER))
        assert store.get(OTHER) is rec
        store.flush()
        got = store.get(OTHER)
        assert got is not None and got.id == rec.id and got.visits == 1


def test_a_store_that_opened_empty_reads_no_row_for_a_url_never_recorded(path):
    """The filter of what it recorded (history/seen_filter.py) answers get() and the
    record of a first visit, as it answers knows(): no read of the file."""
    with CountingStore(path) as store:
        assert store.get(OTHER) is None
        rec = store.record(visit(fp=OTHER))
        assert store.reads == 0
        assert store.get(OTHER) is rec
        store.flush()
        assert store.get(OTHER).visits == 1  # recorded: read from the file
        assert store.reads == 1
        again = store.record(visit(fp=OTHER, t=2000.0, changed=False))
        assert (again.id, again.visits) == (rec.id, 2)


def test_a_url_known_new_is_not_read_again_across_flushes(path):
    """knows() found no row: the URL's first visit, even after flushes of other visits,
    reads nothing more; once recorded it is known, and a reopened store asks again."""
    with CountingStore(path) as store:
        assert not store.knows(OTHER)
        for t in range(3):  # other URLs' visits, each flushed
            store.record(visit(t=1000.0 + t, signature=b"s"))
            store.flush()
        reads = store.reads
        assert store.get(OTHER) is None and not store.knows(OTHER)
        rec = store.record(visit(fp=OTHER, t=2000.0, signature=b"s"))
        assert store.reads == reads and rec.visits == 1
        assert store.knows(OTHER)
        store.flush()
        assert store.knows(OTHER) and store.get(OTHER).visits == 1
    # the lock is free again: another writer adds a URL this object had found absent
    store = CountingStore(path)
    store.open()
    try:
        third = b"\x04" * 20
        assert not store.knows(third)
        store.close()
        with SqliteHistoryStore(path) as other:
            other.record(visit(fp=third, t=3000.0))
        store.open()
        assert store.knows(third) and store.get(third).visits == 1
    finally:
        store.close()


def test_the_urls_known_new_are_bounded(path, monkeypatch):
    monkeypatch.setattr("scrapy_recrawl.history.sqlite_reader._ABSENT_KEPT", 4)
    with SqliteHistoryStore(path) as store:
        for i in range(10):
            assert not store.knows(bytes([i + 10]) * 20)
        assert len(store._absent) == 4
        assert store.get(bytes([10]) * 20) is None  # forgotten: read from the file again


def test_a_reopened_store_reads_what_another_writer_wrote_meanwhile(path):
    store = SqliteHistoryStore(path)
    store.open()
    store.record(visit())
    store.flush()
    assert store.get(FP).visits == 1
    store.close()
    # the lock is free: another process (here another store object) writes the file
    with SqliteHistoryStore(path) as other:
        other.record(visit(t=2000.0))
    store.open()
    try:
        assert store.get(FP).visits == 2
    finally:
        store.close()


def test_clear_forgets_the_records_read(path):
    with SqliteHistoryStore(path) as store:
        store.record(visit())
        store.flush()
        assert store.get(FP) is not None
        store.clear()
        assert store.get(FP) is None
        assert store.record(visit()).visits == 1


def test_the_cache_is_bounded(path, monkeypatch):
    monkeypatch.setattr("scrapy_recrawl.history.sqlite_reader._CLEAN_RECORDS", 4)
    with SqliteHistoryStore(path) as store:
        store.record(visit())  # a file with a URL: unknown ones are read (and cached)
    with SqliteHistoryStore(path) as store:
        for i in range(10):
            assert store.get(bytes([100 + i]) * 20) is None
        assert len(store._clean) == 4


def test_a_record_read_is_the_record_written(path):
    """_fetch makes the record without the dataclass's __init__: every field is there,
    NULLs read as NaN, flags as booleans."""
    assert {f.name for f in fields(UrlRecord)} == {*RECORD_FIELDS, "signature"}
    with SqliteHistoryStore(path) as store:
        written = store.record(visit(signature=b"s1", body=b"x", etag='"e"'))
    with SqliteHistoryStore(path) as store:
        read = store.get(FP)
    # NaN is not NaN: compared as text, field by field, with their types
    assert [(f.name, repr(getattr(read, f.name))) for f in fields(UrlRecord)] == [
        (f.name, repr(getattr(written, f.name))) for f in fields(UrlRecord)
    ]
    assert read.signature == b"s1"
    assert math.isnan(read.D) and read.has_body is True and read.gone is False


def test_the_cache_holds_no_big_signature(path):
    """A big page's signature (24 bytes an element: a 1 MB page of 20,000 elements
    makes ~500 KB) is not kept by the cache: 1,024 of them in flight would hold
    hundreds of MB where the point reads before it held none."""
    big = b"\x07" * (512 * 1024)
    small = b"\x08" * 1024
    fps = [bytes([10 + i]) * 20 for i in range(8)]
    with SqliteHistoryStore(path) as store:
        for i, fp in enumerate(fps):
            store.record(visit(fp=fp, signature=big if i % 2 else small))
    with CountingStore(path) as store:
        for fp in fps:
            assert store.get(fp, signature=False) is not None
        held = sum(len(r.signature or b"") for r in store._clean.values() if r is not None)
        assert held <= 64 * 1024 * len(fps)  # what the cache's bound says: tens of MB at worst
        # each is still read as it is: a big one from the file again, with its signature
        assert store.get(fps[1]).signature == big
        assert store.get(fps[0]).signature == small
        reads = store.reads
        saved = store.record(visit(fp=fps[1], t=2000.0, status=304, changed=False))
        assert saved.signature == big and saved.visits == 2
        assert store.reads == reads + 1


def test_a_store_reopened_after_a_failed_close_gives_no_id_twice(path):
    """close() whose flush failed keeps its buffered visits; reopened, the store gives a
    new URL a new id (it gave the buffered URL's id again, and the flush then replaced
    that URL's row with the new one's)."""
    import sqlite3

    from scrapy_recrawl.history import HistoryStoreError

    store = SqliteHistoryStore(path, flush_every=100)
    store.open()
    side = sqlite3.connect(path, isolation_level=None)
    side.execute("CREATE TRIGGER f BEFORE INSERT ON visits BEGIN SELECT RAISE(ABORT,'full'); END")
    a = store.record(visit(fp=FP))
    with pytest.raises(HistoryStoreError):
        store.close()
    side.execute("DROP TRIGGER f")
    side.close()
    store.open()
    try:
        b = store.record(visit(fp=OTHER, t=2000.0))
        assert b.id != a.id and len(store) == 2
        store.flush()
        assert store.knows(FP) and store.knows(OTHER)
    finally:
        store.close()
    with SqliteHistoryStore(path) as again:
        assert again.get(FP).id == a.id and again.get(OTHER).id == b.id


def test_a_store_that_opened_empty_knows_its_new_urls_without_a_query(path):
    """A first crawl: the file had no URL at open, so a URL is in it only if this store
    recorded it since (seen_filter.py); knows() asks the file only for those."""
    fps = [bytes([i % 256, i // 256]) * 10 for i in range(2000)]
    with CountingStore(path, flush_every=300) as store:
        reads = getattr(store, "file_reads", 0)
        for i, fp in enumerate(fps):
            assert not store.knows(fp)
            store.record(visit(fp=fp, t=1000.0 + i, signature=b"s"))
        assert getattr(store, "file_reads", 0) == reads  # flushes write; no read
        assert all(store.knows(fp) for fp in fps)  # buffered or written: known
        store.flush()
        assert all(store.knows(fp) for fp in fps[:50])
        # a URL never recorded: known new with no query, whatever was flushed
        reads = store.file_reads
        assert not store.knows(b"\xff" * 20) and store.file_reads == reads
        store.clear()  # the file is empty again: what it held is not known any more
        reads = store.file_reads
        assert not any(store.knows(fp) for fp in fps[:50]) and store.file_reads == reads
        store.record(visit(fp=fps[0], t=5000.0))
        assert store.knows(fps[0])
    # reopened with URLs in the file: each unknown URL is asked, and the file's are known
    with CountingStore(path) as store:
        assert store.knows(fps[0]) and not store.knows(fps[1])
        assert store.file_reads >= 2


def test_a_store_that_opened_with_urls_asks_the_file(path):
    with SqliteHistoryStore(path) as store:
        store.record(visit(fp=FP))
    with CountingStore(path) as store:
        assert not store.knows(OTHER)
        assert store.knows(FP)  # in the file, never recorded by this object
        assert store.file_reads == 2
