"""Readers beside a crawl (history/sqlite_readonly.py): an offline command's store
opened read-only keeps one snapshot while a real crawl, started after it, writes
the store. Real files, a real ``scrapy crawl`` in a process of its own."""

from __future__ import annotations

import threading

import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit

from .helpers import LocalSite, Page, run_crawl


def snapshot(store: SqliteHistoryStore) -> tuple:
    """What a report reads, through the store and straight from its connection."""
    db = store.db
    arrays = store.arrays()
    return (
        len(store),
        store.cycle,
        db.execute("SELECT COUNT(*), SUM(visits), MAX(id) FROM urls").fetchone(),
        db.execute("SELECT COUNT(*), MAX(id) FROM visits").fetchone(),
        db.execute("SELECT value FROM meta WHERE key = 'cycle'").fetchone(),
        int(arrays.columns["n"].sum()),
        len(arrays.columns["n"]),
        db.execute("PRAGMA quick_check").fetchall(),
    )


@pytest.mark.slow
def test_a_reader_keeps_its_snapshot_while_a_crawl_started_after_it_writes(tmp_path):
    path = tmp_path / "h.sqlite3"
    # a closed store (no -wal file: what the reader used to open `immutable`), with
    # pages enough that the reader's reads go to the file, not only to its cache; its
    # URLs gone, so the crawl fetches only the local site's
    with SqliteHistoryStore(path) as store:
        for u in range(3000):
            store.record(Visit(f"fp{u}".encode(), f"http://old/{u}", 1000.0, 410, gone=True))
    assert not (tmp_path / "h.sqlite3-wal").exists()

    reader = SqliteHistoryStore(path, read_only=True)
    reader.open()
    # a one-page cache: every read of the snapshot goes to the file the crawl writes
    reader.db.execute("PRAGMA cache_size=1")
    first = snapshot(reader)
    assert first[0] == 3000 and first[-1] == [("ok",)]

    with LocalSite() as site:
        for i in range(100):
            links = "".join(f'<a href="/p{j}">p{j}</a>' for j in (i + 1, i + 2) if j < 100)
            site.pages[f"/p{i}"] = Page(
                f"<html><body><p>page {i}</p>{links}</body></html>".encode()
            )
        settings = {
            "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
            "RECRAWL_STORE": str(path),
            "RECRAWL_FLUSH_EVERY": 1,  # a write transaction per visit: many commits
            "CONCURRENT_REQUESTS": 4,
        }
        done: list[dict] = []
        crawl = threading.Thread(
            target=lambda: done.append(
                run_crawl([f"{site.url}/p0"], settings, tmp_path, follow=True)
            )
        )
        crawl.start()
        reads = 0
        try:
            while crawl.is_alive():
                assert snapshot(reader) == first
                reads += 1
            crawl.join()
            assert snapshot(reader) == first  # after the crawl closed the store too
        finally:
            crawl.join()
            reader.close()
    assert done and len(done[0]["items"]) == 100
    assert reads > 0
    # the crawl did write: a new reader sees its pages, whole
    with SqliteHistoryStore(path, read_only=True) as after:
        now = snapshot(after)
    assert now[0] == 3100 and now[1] > first[1] and now[-1] == [("ok",)]
