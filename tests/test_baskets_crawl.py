"""Probes in a real continuous crawl: fetched at their offsets (time compressed),
on each store backend (the probe state lives in the store's side storage)."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.estimate.probes import ProbeStore
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore

from .helpers import LocalSite, Page, run_crawl

pytestmark = pytest.mark.slow

HOUR_SECONDS = 0.25  # one "hour" of the offsets lasts 0.25 s in this test
OFFSETS = [4, 8, 12, 16]  # hours: 1, 2, 3 and 4 s after the first fetch
TOLERANCE = 0.6  # seconds a probe may come after its offset


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_probes_are_fetched_at_their_offsets_in_continuous_mode(tmp_path, backend, request):
    if backend == "redis":
        url = request.getfixturevalue("redis_db").url
        store_setting, make_store = url, lambda: RedisHistoryStore(url, key="test:history")
    else:
        path = tmp_path / "history.sqlite3"
        store_setting, make_store = str(path), lambda: SqliteHistoryStore(path)
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(4))
        site.pages["/"] = Page(f"<html><body><h1>Index</h1>{links}</body></html>".encode())
        for i in range(4):
            text = f"page {i} with a few words of text to compare, version zero"
            site.pages[f"/p{i}"] = Page(f"<html><body><p>{text}</p></body></html>".encode())
        settings = {
            "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
            "RECRAWL_STORE": store_setting,
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
    with make_store() as store:
        log = store.visit_log()
        states = ProbeStore(store).active()
        ids, features = ProbeStore(store).features(done_only=True)
        first = ProbeStore(store).states()
    assert states == [] and len(ids) == 5
    for url_id, feats in zip(ids.tolist(), features, strict=True):
        first_time = first[url_id].first_time
        feats = feats.reshape(len(OFFSETS), 2, 4)
        assert (feats >= 0).all(), "every offset has its probe"
        times = np.sort(log["time"][log["url_id"] == url_id])
        assert len(times) == 1 + len(OFFSETS), times - times[0]
        late = times[1:] - first_time - np.asarray(OFFSETS) * HOUR_SECONDS
        assert (late >= 0).all() and (late <= TOLERANCE).all(), late
