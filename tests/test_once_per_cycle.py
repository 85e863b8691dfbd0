"""Each URL is fetched at most once per cycle, on both schedulers (the cycle core's rule).

A start URL that is also one of the cycle's recrawls used to be fetched twice by
the SQLite scheduler (once as the start request, once as the recrawl).
"""

from __future__ import annotations

from collections import Counter

import pytest

from .helpers import LocalSite, Page, run_crawl
from .redis_server import redis_db, redis_server  # noqa: F401 -- fixtures

pytestmark = pytest.mark.slow


def _site() -> LocalSite:
    site = LocalSite()
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(8))
    site.pages["/"] = Page(f"<html><body><h1>Index</h1>{links}</body></html>".encode())
    for i in range(8):
        site.pages[f"/p{i}"] = Page(f"<html><body><p>page {i}</p></body></html>".encode())
    return site


def _backend_settings(backend: str, tmp_path, redis_server) -> dict:  # noqa: F811
    if backend == "sqlite":
        return {"RECRAWL_STORE": str(tmp_path / "history.sqlite3")}
    return {
        "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
        "REDIS_URL": redis_server.url,
    }


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_start_url_that_is_also_a_recrawl_is_fetched_once(backend, tmp_path, request):
    redis = request.getfixturevalue("redis_db") if backend == "redis" else None
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RETRY_ENABLED": False,
        **_backend_settings(backend, tmp_path, redis),
    }
    with _site() as site:
        for cycle in range(3):  # warm-up cycles recrawl everything, the start URL included
            site.log.clear()
            run_crawl([site.url + "/"], settings, tmp_path, follow=True, start_dont_filter=True)
            fetched = Counter(entry["path"] for entry in site.log)
            assert fetched["/"] == 1, (cycle, fetched)
            assert max(fetched.values()) == 1, (cycle, fetched)
