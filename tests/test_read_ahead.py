"""A cycle's recrawls are read from the store a block ahead of their visits
(history/base.py: ReadAheadStore; frontier/local.py: LocalFrontier._read_ahead): the
SQLite store answers each visit's reads from that block, never one query a URL, and
what a visit reads is what the file holds."""

from __future__ import annotations

import numpy as np
from scrapy import Request
from scrapy.utils.request import RequestFingerprinter

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.base import Visit, read_ahead

from .helpers import offline_scheduler, store_of_pages

PAGES = 300


def _count_reads(monkeypatch) -> dict[str, list[int]]:
    """The reads of one URL's row (``fetched``) and the sizes of the blocks read ahead,
    by every SQLite store of the test."""
    seen: dict[str, list[int]] = {"fetched": [], "blocks": []}
    fetch, ahead = SqliteHistoryStore._fetch, SqliteHistoryStore.read_ahead

    def counted_fetch(self, fingerprint, **kw):
        seen["fetched"].append(1)
        return fetch(self, fingerprint, **kw)

    def counted_ahead(self, ids):
        seen["blocks"].append(len(ids))
        return ahead(self, ids)

    monkeypatch.setattr(SqliteHistoryStore, "_fetch", counted_fetch)
    monkeypatch.setattr(SqliteHistoryStore, "read_ahead", counted_ahead)
    return seen


def _store(tmp_path) -> str:
    path = str(tmp_path / "history.sqlite3")
    store_of_pages(
        path,
        PAGES,
        signature=lambda i: b"s%d" % i,
        body=lambda i: b"<p>%d</p>" % i,
        headers=lambda i: {"Content-Type": ["text/html"]},
        etag=lambda i: f'"e{i}"',
    )
    return path


def test_a_cycles_recrawls_are_read_a_block_ahead_not_one_query_a_visit(tmp_path, monkeypatch):
    path = _store(tmp_path)
    reads = _count_reads(monkeypatch)
    # RECRAWL_WARMUP_CYCLES: every known page recrawled this cycle
    scheduler = offline_scheduler({"RECRAWL_STORE": path, "RECRAWL_WARMUP_CYCLES": 5})
    store = scheduler.store
    fingerprint = scheduler.crawler.request_fingerprinter.fingerprint
    visited = 0
    while (request := scheduler.next_request()) is not None:
        # what the middleware reads for a recrawl: its record (the validators), its body
        fp = fingerprint(request)
        rec = store.get(fp, signature=False)
        assert rec is not None and rec.url == request.url
        i = int(request.url.rsplit("p", 1)[1])
        assert (rec.signature, rec.etag) == (b"s%d" % i, f'"e{i}"')  # read with it
        assert store.body(fp).body == b"<p>%d</p>" % i
        visited += 1
    assert visited == PAGES
    assert reads["fetched"] == []  # no URL read on its own
    assert sum(reads["blocks"]) >= PAGES and len(reads["blocks"]) <= PAGES // 32
    scheduler.close("finished")


def test_reading_ahead_leaves_buffered_and_cached_records_as_they_are(tmp_path):
    path = _store(tmp_path)
    fingerprint = RequestFingerprinter().fingerprint
    fp = [fingerprint(Request(f"http://example.com/p{i}")) for i in range(3)]
    with SqliteHistoryStore(path) as store:
        reader = read_ahead(store)
        assert reader is store
        newer = store.record(Visit(fp[0], "http://example.com/p0", 2.0, 200, body=b"<p>new</p>"))
        held = store.get(fp[1])
        reader.read_ahead(np.array([1, 2, 3, 10_000], dtype=np.int64))  # ids 1.. and none
        assert store.get(fp[0]) is newer and store.body(fp[0]).body == b"<p>new</p>"
        assert store.get(fp[1]) is held  # the record handed out before: not replaced
        assert store.get(fp[2]).visits == 1 and store.body(fp[2]).body == b"<p>2</p>"


def test_recrawls_out_of_rank_order_are_read_ahead_each_block_once(tmp_path, monkeypatch):
    """Recrawls leave per download slot, so a busy host's come out of rank order: each
    block of ranks is read once, whatever the order the ranks come in."""
    path = _store(tmp_path)
    reads = _count_reads(monkeypatch)
    scheduler = offline_scheduler({"RECRAWL_STORE": path, "RECRAWL_WARMUP_CYCLES": 5})
    frontier = scheduler.frontier
    ranks = np.random.default_rng(7).permutation(PAGES).tolist()
    for rank in ranks:
        frontier._read_ahead(rank)
    assert sorted(reads["blocks"]) == [PAGES % 64] + [64] * (PAGES // 64)
    scheduler.close("finished")
