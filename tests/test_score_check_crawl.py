"""A scorer that ranks nothing, in real crawls on both backends: ``X/0`` (protected: 0
everywhere) is warned about, naming RECRAWL_SCORER, at the first cycle whose history
tells the pages apart, and not before; the default scorer on the same site never is."""

from __future__ import annotations

import pytest

from .helpers import LocalSite, Page, run_crawl
from .redis_server import RedisServer

pytestmark = pytest.mark.slow

PAGES = 8


def page(i: int, version: int) -> Page:
    words = " ".join(f"word{i}v{version}n{k}" for k in range(40))
    return Page(f"<html><body><h1>page {i}</h1><p>{words}</p></body></html>".encode())


def warnings_by_cycle(tmp_path, settings):
    """Three cycles of a site whose first three pages change after the first; the
    scorer warnings logged in each."""
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": "100%",
        "LOG_LEVEL": "INFO",
        **settings,
    }
    found = []
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(PAGES))
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for cycle in (1, 2, 3):
            for i in range(PAGES):
                site.pages[f"/p{i}"] = page(i, cycle if i < 3 else 0)
            log = run_crawl([site.url + "/"], settings, tmp_path, follow=True)["log"]
            found.append([line for line in log.splitlines() if "RECRAWL_SCORER=" in line])
    return found


@pytest.fixture(params=["sqlite", "redis"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        yield {"RECRAWL_STORE": str(tmp_path / "history.sqlite3")}
        return
    with RedisServer() as server:
        yield {"SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler", "REDIS_URL": server.url}


def test_a_scorer_that_gives_every_page_zero_is_warned_about_once_history_differs(
    tmp_path, backend
):
    found = warnings_by_cycle(tmp_path, {**backend, "RECRAWL_SCORER": "X/0"})
    # cycle 1: nothing known; cycle 2: every page seen once (X = 0 everywhere), so no
    # formula could rank them; cycle 3: three pages changed, and X/0 still gives 0
    assert found[0] == [] and found[1] == [], found
    (line,) = found[2]
    assert "WARNING" in line and "RECRAWL_SCORER='X/0': one score (0) covers 100%" in line
    assert "URLs scored at cycle 3" in line and "terminals (X)" in line


def test_the_default_scorer_is_not_warned_about(tmp_path):
    # aad+ gives the unchanged pages (most of them) one score while they share their
    # history too (one age, no change): the history's doing, not the formula's
    found = warnings_by_cycle(tmp_path, {"RECRAWL_STORE": str(tmp_path / "h.sqlite3")})
    assert found == [[], [], []]
