"""Continuous mode's clock: one cycle per RECRAWL_CYCLE_PERIOD, idle in between.

The rules (core/cycle.py) on their own, then the scheduler (RecrawlScheduler with its
LocalFrontier, a real SQLite store) on an injected clock (Twisted's task.Clock): no
test here waits for wall time. The real crawls are in tests/test_continuous_crawl.py.
"""

from __future__ import annotations

import pytest
from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from twisted.internet.task import Clock

from scrapy_recrawl.core.cycle import CycleConfig, cycle_done, cycles_remain, next_period_start
from scrapy_recrawl.scheduler import RecrawlScheduler
from scrapy_recrawl.settings import RecrawlSettingError

from .helpers import offline_scheduler, store_of_pages

# -- the rules -------------------------------------------------------------------------


def test_a_cycle_is_over_when_its_work_is_done_its_time_is_up_or_its_period_ends():
    config = CycleConfig(cycle_seconds=600.0, cycle_period=3600.0)
    asked = []

    def work(left: bool):
        return lambda: asked.append(left) or left

    assert not cycle_done(config, work_left=work(True), elapsed=10, period_elapsed=10)
    assert cycle_done(config, work_left=work(False), elapsed=10, period_elapsed=10)
    assert asked == [True, False]
    # time up: the work is not even asked about
    assert cycle_done(config, work_left=work(True), elapsed=600, period_elapsed=600)
    longer = CycleConfig(cycle_seconds=7200.0, cycle_period=3600.0)
    assert cycle_done(longer, work_left=work(True), elapsed=3600, period_elapsed=3600)
    assert asked == [True, False]


def test_the_next_cycle_opens_at_the_next_period_start_missed_ones_skipped():
    config = CycleConfig(cycle_period=60.0)
    assert next_period_start(config, 100.0, 100.5) == 160.0  # wait until then
    assert next_period_start(config, 100.0, 160.0) == 160.0  # open now
    assert next_period_start(config, 100.0, 219.9) == 160.0  # late, in that period
    assert next_period_start(config, 100.0, 220.0) == 220.0  # one start missed: skipped
    assert next_period_start(config, 100.0, 1010.0) == 1000.0  # on the same grid
    assert cycles_remain(CycleConfig(max_cycles=0), 10**6)
    assert cycles_remain(CycleConfig(max_cycles=3), 2)
    assert not cycles_remain(CycleConfig(max_cycles=3), 3)


@pytest.mark.parametrize("value", [0, -5, "soon", float("inf"), True])
def test_a_bad_period_is_refused_naming_the_setting(value):
    with pytest.raises(RecrawlSettingError) as err:
        CycleConfig.from_settings({"RECRAWL_CYCLE_PERIOD": value})
    assert str(err.value).startswith("RECRAWL_CYCLE_PERIOD=")
    assert "\n" not in str(err.value)


def test_the_period_defaults_to_an_hour_and_reads_from_the_command_line():
    assert CycleConfig.from_settings({}).cycle_period == 3600.0
    assert CycleConfig.from_settings({"RECRAWL_CYCLE_PERIOD": "10"}).cycle_period == 10
    assert CycleConfig.from_settings({"RECRAWL_CYCLE_PERIOD": "0.5"}).cycle_period == 0.5


# -- the scheduler on an injected clock ------------------------------------------------


PAGES = 20


def _open(tmp_path, **settings) -> tuple[RecrawlScheduler, Clock]:
    """A RecrawlScheduler opened on a SQLite store that knows PAGES pages, its periods
    on a task.Clock; the engine's downloader is real, nothing is downloaded."""
    path = str(tmp_path / "history.sqlite3")
    store_of_pages(path, PAGES)
    clock = Clock()
    clock.advance(1000.0)
    scheduler = offline_scheduler(
        {
            "RECRAWL_STORE": path,
            "RECRAWL_CONTINUOUS": True,
            "RECRAWL_WARMUP_CYCLES": 0,
            "RECRAWL_CYCLE_PERIOD": 60,
            **settings,
        },
        clock=clock,
    )
    return scheduler, clock


def _drain(scheduler: RecrawlScheduler) -> list[Request]:
    """What the engine would take now; each request downloaded at once."""
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
        scheduler.crawler.signals.send_catch_log(
            signals.request_left_downloader, request=request, spider=scheduler.spider
        )
    return out


def _idle(scheduler: RecrawlScheduler, turns: int = 1) -> None:
    """The engine finding the spider idle ``turns`` times (spider_idle, its heartbeat)."""
    for _ in range(turns):
        assert not scheduler.has_pending_requests()
        with pytest.raises(DontCloseSpider):
            scheduler._on_idle(scheduler.spider)
        assert scheduler.next_request() is None


def _stat(scheduler: RecrawlScheduler, key: str) -> int:
    return int(scheduler.crawler.stats.get_value(key, 0))


def test_one_cycle_per_period_however_often_the_engine_asks(tmp_path):
    scheduler, clock = _open(tmp_path, RECRAWL_BUDGET=5)
    store, frontier = scheduler.store, scheduler.frontier
    first = store.cycle
    assert len(_drain(scheduler)) == 5  # the budget, and no more
    # the budget is handed out and done: the cycle is summed up and the crawl waits
    # (before, a cycle opened at each of these turns: 732 cycles in 42 s)
    _idle(scheduler, turns=1000)
    assert store.cycle == first and frontier.waiting
    assert _stat(scheduler, "recrawl/cycles_summarized") == 1
    timers = clock.getDelayedCalls()
    assert len(timers) == 1 and timers[0].getTime() == 1060.0  # the next period's start
    clock.advance(59.9)
    _idle(scheduler)
    assert store.cycle == first
    clock.advance(0.1)  # the timer wakes the engine, which asks for a request
    assert clock.getDelayedCalls() == []
    assert len(_drain(scheduler)) == 5
    assert store.cycle == first + 1 and frontier.period_start == 1060.0
    _idle(scheduler, turns=100)
    # the store's cycle counter, t's clock, went up once in the period, not per turn
    assert store.cycle == first + 1


def test_a_cycle_that_cannot_spend_its_budget_ends_when_nothing_is_left(tmp_path):
    # the budget counts more than can be fetched (as "100%" did with a URL in flight or
    # backed off): the cycle ends when its queues are empty and nothing is in flight,
    # not after RECRAWL_CYCLE_SECONDS, and the next opens at the period start
    scheduler, clock = _open(tmp_path, RECRAWL_BUDGET=PAGES + 5, RECRAWL_CYCLE_SECONDS=3600)
    first = scheduler.store.cycle
    assert len(_drain(scheduler)) == PAGES
    assert scheduler.frontier.budget_left()
    _idle(scheduler)
    assert scheduler.frontier.waiting
    assert scheduler.crawler.stats.get_value("recrawl/last_cycle/seconds") == 0.0
    clock.advance(60)
    assert len(_drain(scheduler)) == PAGES and scheduler.store.cycle == first + 1


def test_cycle_seconds_still_ends_a_long_cycle_and_the_period_still_rules(tmp_path):
    scheduler, clock = _open(tmp_path, RECRAWL_BUDGET=10, RECRAWL_CYCLE_SECONDS=10)
    first = scheduler.store.cycle
    assert scheduler.next_request() is not None  # the rest is "downloading" slowly
    clock.advance(10)
    assert scheduler.next_request() is None  # its time is up: nothing more of it
    assert scheduler.frontier.waiting and scheduler.store.cycle == first
    # summed up as it ended, on the injected clock: exactly its RECRAWL_CYCLE_SECONDS
    assert scheduler.crawler.stats.get_value("recrawl/last_cycle/seconds") == 10.0
    assert [c.getTime() for c in clock.getDelayedCalls()] == [1060.0]
    clock.advance(50)
    assert len(_drain(scheduler)) == 10 and scheduler.store.cycle == first + 1


def test_a_period_longer_than_cycle_seconds_and_missed_starts(tmp_path):
    scheduler, clock = _open(tmp_path, RECRAWL_BUDGET=3)
    first = scheduler.store.cycle
    _drain(scheduler)
    _idle(scheduler)
    clock.pump([100.0, 150.0])  # held up (a suspended machine): 250 s, four starts missed
    assert len(_drain(scheduler)) == 3
    assert scheduler.store.cycle == first + 1  # one cycle, not five
    assert scheduler.frontier.period_start == 1240.0  # on the grid: 1000 + 4 * 60
    _idle(scheduler)
    assert [c.getTime() for c in clock.getDelayedCalls()] == [1300.0]


def test_max_cycles_closes_once_the_last_cycle_is_done_without_waiting(tmp_path):
    scheduler, clock = _open(tmp_path, RECRAWL_BUDGET=3, RECRAWL_MAX_CYCLES=2)
    _drain(scheduler)
    _idle(scheduler)
    clock.advance(60)
    _drain(scheduler)
    assert not scheduler.has_pending_requests()
    scheduler._on_idle(scheduler.spider)  # no DontCloseSpider: the spider closes
    scheduler.close("finished")
    assert clock.getDelayedCalls() == []


def test_closing_while_waiting_cancels_the_timer_and_sums_up_once(tmp_path):
    scheduler, clock = _open(tmp_path, RECRAWL_BUDGET=3)
    _drain(scheduler)
    _idle(scheduler)
    assert len(clock.getDelayedCalls()) == 1
    scheduler.close("shutdown")  # SIGINT during the wait
    assert clock.getDelayedCalls() == []
    assert _stat(scheduler, "recrawl/cycles_summarized") == 1
