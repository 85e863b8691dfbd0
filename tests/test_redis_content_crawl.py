"""Paper 004 on the Redis scheduler and store: real crawls (subprocesses) of a local
site with ``RECRAWL_CHANGE_TEST = "chi2"`` and a scorer over ``C1``, ``D1`` and ``Q``,
as tests/test_content_crawl.py does on SQLite."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.history.records import unpack_list
from scrapy_recrawl.history.redis import RedisHistoryStore

from . import test_content_crawl as on_sqlite
from .helpers import run_crawl
from .test_content_crawl import BIG, PAGES, TRIVIAL, publish
from .test_scheduler import page_items

pytestmark = [pytest.mark.slow, pytest.mark.planning]  # RECRAWL_CHANGE_TEST = "chi2": scipy

site = on_sqlite.site  # the same changing site as the SQLite crawl


def _num(url: str) -> int:
    return int(url.rsplit("p", 1)[1])


def test_chi2_and_window_and_experts_terminals_on_redis(site, redis_server, tmp_path):
    budget = 4
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
        "REDIS_URL": redis_server.url,
        "RECRAWL_CHANGE_TEST": "chi2",
        "RECRAWL_BUDGET": budget,
        "RECRAWL_NEW_SHARE": 0.0,
        "RECRAWL_SCORER": "C1 + D1 + Q + 0.01 * t",
        "RECRAWL_EXPERTS": 3,
    }
    start = [site.url + "/"]
    for version in range(5):  # cycles 1-2 warm-up, 3-5 budgeted
        publish(site, version)
        site.log.clear()
        result = run_crawl(start, settings, tmp_path, follow=True)
        assert "Traceback" not in result["log"], result["log"][-3000:]
        cycle = result["stats"]["recrawl/cycle"]
        assert cycle == version + 1
        items = {_num(i["url"]): i for i in page_items(result)}
        if cycle <= 2:
            assert set(items) == set(range(PAGES))
            if cycle == 2:  # chi2: the rewrites changed, the one-word edits did not
                changed = {n for n, i in items.items() if i["recrawl"]["changed"]}
                assert changed == set(BIG), changed
                assert all(items[n]["recrawl"]["distance"] > 0 for n in TRIVIAL)
            continue
        recrawled = [i for i in result["items"] if i["rank"] is not None]
        assert 1 <= len(recrawled) <= budget, recrawled
        assert len(site.log) <= budget + 1, site.log  # + the start request
        if cycle >= 4:  # the rewritten pages were seen changed (C1 = D1 = 1): first
            assert {_num(i["url"]) for i in recrawled if "/p" in i["url"]} & BIG
    with RedisHistoryStore(redis_server.url, key="test:history") as store:
        log = store.visit_log()
        for cycle in (3, 4, 5):
            assert (log["cycle"] == cycle).sum() <= budget + 1
        urls = store.urls(log["url_id"])
        changed = {_num(u) for u, ch in zip(urls, log["changed"], strict=True) if ch == 1}
        assert changed and changed <= set(BIG), changed
        # the bags (the last RECRAWL_WINDOW versions: a D* terminal is used) and distances
        client = store.client
        assert client.hlen("{test:history}:side:content_bags") >= PAGES
        ids = store.arrays().ids
        kept = [len(unpack_list(b)) for b in store.side_get("content_bags", ids) if b]
        assert max(kept) == 3 and min(kept) >= 1
        d = np.array(
            [np.frombuffer(b, "<f8") for b in store.side_get("content_dists", ids) if b is not None]
        )
        assert d.shape[1] == 3 and (d[:, 0] > 0).any()
