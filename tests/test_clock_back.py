"""A wall clock that goes back (issue 29): detected when a cycle is planned (a warning
naming the store, a stat), and ``hours`` counted from 0 for visits "in the future",
never negative (``log(1 + hours)`` was NaN for every URL and the picks arbitrary).
The clock is injected (the crawl's tally clock), a real SQLite store, a real scheduler."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import numpy as np
import pytest

from scrapy_recrawl.core.cycle import CLOCK_SLACK, clock_behind
from scrapy_recrawl.cycle_summary import tally_for_crawler
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.scoring.registry import compute_terminals

DAY = 86400.0


def fill(path, t0: float) -> None:
    """Four cycles of 6 URLs (a first fetch, then three comparisons, the last at t0): URL
    u changed min(u, 3) times."""
    store = SqliteHistoryStore(path)
    store.open()
    for cycle in range(1, 5):
        store.advance_cycle()
        for u in range(6):
            changed = None if cycle == 1 else (cycle - 1) <= u
            store.record(
                Visit(f"fp{u}".encode(), f"http://h/{u}", t0 - (4 - cycle) * 60, 200, changed)
            )
    store.close()


def scheduler_at(path, clock):
    from scrapy import Spider
    from scrapy.core.downloader import Downloader
    from scrapy.utils.test import get_crawler

    from scrapy_recrawl.scheduler import RecrawlScheduler

    crawler = get_crawler(
        Spider,
        {
            "RECRAWL_STORE": str(path),
            "RECRAWL_BUDGET": 3,
            "RECRAWL_NEW_SHARE": 0,
            "RECRAWL_MONITOR_SHARE": 0,
            # hours < 0 (a day back: -24) turns the ranking upside down; with hours >= 0
            # (a visit "in the future" made now), the URLs by their changes
            "RECRAWL_SCORER": "X * (1 + hours)",
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
        },
    )
    crawler.engine = SimpleNamespace(downloader=Downloader(crawler), _slot=None, scraper=None)
    tally_for_crawler(crawler).clock = clock  # the injected wall clock
    scheduler = RecrawlScheduler.from_crawler(crawler)
    scheduler.open(Spider.from_crawler(crawler, name="spider"))
    return crawler, scheduler


@pytest.mark.parametrize("back", [0.0, DAY])
def test_a_clock_a_day_back_is_said_at_the_cycle_and_hours_stay_at_zero(tmp_path, caplog, back):
    path = tmp_path / "h.sqlite3"
    t0 = time.time()
    fill(path, t0)
    caplog.set_level(logging.WARNING, logger="scrapy_recrawl")
    crawler, scheduler = scheduler_at(path, lambda: t0 + 5 - back)
    try:
        picks = sorted(
            r.url for r in iter(scheduler.next_request, None) if r.meta.get("recrawl_kind")
        ) or sorted(r.url for r in iter(scheduler.next_request, None))
    finally:
        scheduler.close("finished")
    went_back = [r.getMessage() for r in caplog.records if "went back" in r.getMessage()]
    stats = crawler.stats.get_stats()
    if back:
        assert len(went_back) == 1, went_back
        assert f"cycle {stats['recrawl/cycle']}:" in went_back[0]
        assert str(path) in went_back[0] and "\n" not in went_back[0]
        assert stats["recrawl/clock_went_back"] == 1
        assert abs(stats["recrawl/clock_behind_seconds"] - DAY) < 120
    else:
        assert went_back == [] and "recrawl/clock_went_back" not in stats
    # the picks are the URLs that changed most, whichever way the clock went
    assert picks == ["http://h/3", "http://h/4", "http://h/5"], picks


def test_hours_never_negative_and_the_lag_measured():
    state = {"last_visit_time": np.array([1000.0, 5000.0, 9000.0])}
    terms = compute_terminals(state, 3, now=5000.0 + 3600.0, needed={"hours"})
    assert terms["hours"].tolist() == [7600.0 / 3600.0, 1.0, 0.0]
    arrays = SimpleNamespace(columns=state)
    assert clock_behind(arrays, 9000.0 - CLOCK_SLACK) == CLOCK_SLACK  # type: ignore[arg-type]
    assert clock_behind(arrays, 9000.0 + 1) == 0.0  # type: ignore[arg-type]
