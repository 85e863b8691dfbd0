"""WebFountain plan mode (RECRAWL_PLANNER) in real crawls of a local site."""

from __future__ import annotations

import pytest

from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.cycle_log import monitor_samples
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.settings import DEFAULTS

from .extras import require_extra
from .helpers import LocalSite, run_crawl
from .test_scheduler import index, page, settings_for

require_extra("planning")
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_plan_mode_keeps_the_budget_and_solves_a_plan(tmp_path, backend, request):
    with LocalSite() as site:
        site.pages["/"] = index(30)
        for i in range(30):
            site.pages[f"/p{i}"] = page(i)
        settings = settings_for(
            tmp_path, RECRAWL_PLANNER="webfountain", RECRAWL_BUDGET=6, RECRAWL_BUCKETS=8
        )
        settings["RECRAWL_MONITOR_SHARE"] = 0.5  # no sample in plan mode: recorded as such
        if backend == "redis":  # the plan reads the store's columns only: any backend
            settings["RECRAWL_STORE"] = request.getfixturevalue("redis_db").url
        for cycle in range(1, 5):
            for i in range(0, 30, 3):  # a third of the pages change every cycle
                site.pages[f"/p{i}"] = page(i, version=cycle)
            site.log.clear()
            result = run_crawl([site.url + "/"], settings, tmp_path, follow=True)
            if cycle > 2:
                budgeted = [i for i in result["items"] if i["rank"] is not None]
                assert 1 <= len(budgeted) <= 6
                assert len(site.log) <= 7  # the budget, plus the start request
                assert result["stats"]["recrawl/plan_solves"] >= 1
    if backend == "redis":
        store = RedisHistoryStore(settings["RECRAWL_STORE"], key="test:history")
    else:
        store = SqliteHistoryStore(tmp_path / "history.sqlite3")
    with store:
        assert store.cycle == 4
        # the plan records each cycle's sample: the warm-up's, none once the planner picks
        samples = monitor_samples(store)
        warmup = DEFAULTS["RECRAWL_WARMUP_CYCLES"]
        assert [share for share, _ in samples.values()] == [
            0.5 if c <= warmup else 0.0 for c in range(1, 5)
        ]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("RECRAWL_PLANNER", "magic"),
        ("RECRAWL_PLAN_STRATEGY", "strategy9"),
        ("RECRAWL_BUCKETS", 300),
    ],
)
def test_bad_plan_settings_stop_the_crawl_at_start(tmp_path, setting, value):
    with LocalSite() as site:
        site.pages["/"] = index(1)
        settings = settings_for(tmp_path, **{"RECRAWL_PLANNER": "webfountain", setting: value})
        with pytest.raises(AssertionError, match=setting):
            run_crawl([site.url + "/"], settings, tmp_path)
        assert site.log == []
