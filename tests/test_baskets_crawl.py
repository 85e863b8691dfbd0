"""Probes in a real continuous crawl: fetched at their offsets (time compressed)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from scrapy_recrawl.history import SqliteHistoryStore

from .helpers import LocalSite, Page, run_crawl

pytestmark = pytest.mark.slow

HOUR_SECONDS = 0.25  # one "hour" of the offsets lasts 0.25 s in this test
OFFSETS = [4, 8, 12, 16]  # hours: 1, 2, 3 and 4 s after the first fetch
TOLERANCE = 0.6  # seconds a probe may come after its offset


def test_probes_are_fetched_at_their_offsets_in_continuous_mode(tmp_path):
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(4))
        site.pages["/"] = Page(f"<html><body><h1>Index</h1>{links}</body></html>".encode())
        for i in range(4):
            text = f"page {i} with a few words of text to compare, version zero"
            site.pages[f"/p{i}"] = Page(f"<html><body><p>{text}</p></body></html>".encode())
        settings = {
            "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
            "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
            "RECRAWL_CONTINUOUS": True,
            # one long cycle planned on an empty store: no recrawl besides the probes
            "RECRAWL_WARMUP_CYCLES": 0,
            "RECRAWL_CYCLE_SECONDS": 600,
            "RECRAWL_BUDGET": 100,
            "RECRAWL_PROBE": True,
            "RECRAWL_PROBE_SHARE": 1.0,
            "RECRAWL_PROBE_OFFSETS": OFFSETS,
            "RECRAWL_HOUR_SECONDS": HOUR_SECONDS,
            "CLOSESPIDER_TIMEOUT": 6,
        }
        result = run_crawl([site.url + "/"], settings, tmp_path, follow=True, timeout=120)
    stats = result["stats"]
    assert stats["recrawl/probes/started"] == 5  # the index and its 4 pages
    assert stats["recrawl/probes/completed"] == 5
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        log = store.visit_log()
        db = sqlite3.connect(tmp_path / "history.sqlite3")
        probes = db.execute("SELECT url_id, first_time, done, features FROM basket_probes")
        rows = probes.fetchall()
    assert len(rows) == 5
    for url_id, first_time, done, features in rows:
        assert done == 1
        feats = np.frombuffer(features, dtype=np.float64).reshape(len(OFFSETS), 2, 4)
        assert (feats >= 0).all(), "every offset has its probe"
        times = np.sort(log["time"][log["url_id"] == url_id])
        assert len(times) == 1 + len(OFFSETS), times - times[0]
        late = times[1:] - first_time - np.asarray(OFFSETS) * HOUR_SECONDS
        assert (late >= 0).all() and (late <= TOLERANCE).all(), late
