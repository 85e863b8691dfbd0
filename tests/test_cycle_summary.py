"""The per-cycle summary a crawl writes (cycle_summary.py, history/cycle_log.py): one
INFO line and recrawl/last_cycle/* stats at the end of each cycle, and the store's
record of each cycle (plan, cut-off, picks; fetched and outcomes per process), checked
against the visit log and what a real local server served."""

from __future__ import annotations

import re

import numpy as np
import pytest

from example_project.site import RunningSite
from scrapy_recrawl.cycle_summary import (
    FRESHNESS_CYCLE_STAT,
    FRESHNESS_HIGH_STAT,
    FRESHNESS_LOW_STAT,
    FRESHNESS_PAGES_STAT,
    FRESHNESS_STAT,
    CycleTally,
    freshness_estimate,
)
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.cycle_log import COUNTS, cycle_records, pick_of, picks
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.insight.cycles import estimate_by_cycle
from scrapy_recrawl.insight.log import VisitLog
from scrapy_recrawl.scoring.freshness import estimate_freshness

from .helpers import LocalSite, index_page, run_crawl, topic_page
from .test_redis_crawl import finish, start_crawl

# `make test` runs pytest-xdist with --dist loadgroup: the module is one group, so
# its crawl (module-scoped) runs once, on one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_cycle_summary")]

LINE = re.compile(
    r"recrawl cycle (\d+) done in \d+ s: fetched (\d+) \((?:(\d+) of a budget of (\d+): |"
    r"warm-up, no budget: )recrawl (\d+), new (\d+), probe (\d+); (?:outside the budget: )?"
    r"monitor (\d+), start (\d+)\), backlog (\d+), (?:first fetch \d+, )?"
    r"changed (\d+), unchanged (\d+), 304 (\d+), errors (\d+), failed (\d+), gone (\d+)$",
    re.MULTILINE,
)
FIGURES = ("recrawl", "new", "probe", "monitor", "start", "backlog", *COUNTS[5:])
PAGES = 12


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """Three cron-style cycles of a 12-page site: a warm-up, then a budget of 6 with a
    monitoring sample; pages change, one disappears, a new one appears."""
    tmp = tmp_path_factory.mktemp("summary")
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp / "history.sqlite3"),
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": 6,
        "RECRAWL_NEW_SHARE": 0.2,
        "RECRAWL_MONITOR_SHARE": 0.15,
        "RECRAWL_SCORER": "cg",
        "LOG_LEVEL": "INFO",
    }
    runs = []
    with LocalSite() as site:
        site.pages["/"] = index_page(PAGES)
        for i in range(PAGES):
            site.pages[f"/p{i}"] = topic_page(i, 0)
        for cycle in (1, 2, 3):
            served_before = len(site.log)
            result = run_crawl([site.url + "/"], settings, tmp, follow=True)
            result["served"] = site.log[served_before:]
            runs.append(result)
            for i in range(0, PAGES, 2):  # every other page changes each cycle
                site.pages[f"/p{i}"] = topic_page(i, cycle)
            if cycle == 1:
                del site.pages["/p11"]  # gone (404) when next recrawled
                site.pages["/"] = index_page(PAGES + 1)  # a new page
                site.pages[f"/p{PAGES}"] = topic_page(PAGES, 0)
    with SqliteHistoryStore(tmp / "history.sqlite3") as store:
        records = cycle_records(store)
        log = store.visit_log()
        kept = {c: picks(store, c) for c in (1, 2, 3)}
        ids = dict(zip(store.urls(store.arrays().ids), store.arrays().ids.tolist(), strict=True))
        found = {}
        for item in runs[2]["items"]:
            if item["rank"] is not None and item["url"] in ids:
                found[item["url"]] = pick_of(store, 3, ids[item["url"]])
        has_first_cycle = "first_cycle" in store.arrays().columns
    return runs, records, log, kept, found, has_first_cycle


def test_each_cycle_ends_in_one_info_line_with_its_figures_in_the_stats(crawled):
    runs = crawled[0]
    for cycle, run in enumerate(runs, start=1):
        [line] = LINE.findall(run["log"])
        assert int(line[0]) == cycle
        stats = run["stats"]
        assert stats["recrawl/last_cycle/cycle"] == cycle
        assert int(line[1]) == stats["recrawl/last_cycle/fetched"]
        assert stats["recrawl/last_cycle/budget"] == int(line[3] or 0)  # 0: warm-up
        assert [int(v) for v in line[4:]] == [stats[f"recrawl/last_cycle/{k}"] for k in FIGURES]
        assert stats["recrawl/backlog"] == stats["recrawl/last_cycle/backlog"]
        assert " 1 pages" not in run["log"]
        # every visit is of one kind: the budget's (recrawl, new, probe) or outside it
        recrawl, new, probe, monitor, start = (int(v) for v in line[4:9])
        assert int(line[1]) == recrawl + new + probe + monitor + start
    first, second, third = (LINE.findall(r["log"])[0] for r in runs)
    assert first[3] == "" and "warm-up, no budget" in runs[0]["log"]
    # the budget is RECRAWL_BUDGET's pages (the monitoring sample and the start request
    # apart, issue 26), and what it paid for fits in it
    for line in (second, third):
        assert int(line[3]) == 6 and int(line[2]) <= 6, line
        assert int(line[2]) == sum(int(v) for v in line[4:7])
    assert int(second[7]) > 0 or int(third[7]) > 0  # a monitoring sample, beside the budget
    # the warm-up fetched the index (the start request) and every page (new)
    assert int(first[5]) == PAGES and int(first[8]) == 1 and int(first[1]) == PAGES + 1


def test_a_cycle_opening_estimates_the_freshness_at_the_end_of_the_one_before(crawled):
    runs, log, has_first_cycle = crawled[0], crawled[2], crawled[5]
    assert FRESHNESS_STAT not in runs[0]["stats"]  # cycle 1 opens: no cycle before it
    if not has_first_cycle:  # a store that hands out no first_cycle: no interval, no figure
        assert FRESHNESS_STAT not in runs[2]["stats"]
        return
    # cycle 1 fetched every page and nothing was observed yet: all current at its end
    first = runs[1]["stats"]
    assert first[FRESHNESS_CYCLE_STAT] == 1 and first[FRESHNESS_STAT] == 1.0
    assert first[FRESHNESS_PAGES_STAT] == PAGES + 1  # the index and the pages
    stats = runs[2]["stats"]
    assert stats[FRESHNESS_CYCLE_STAT] == 2
    # recrawl-report's estimate from the visit log: the same definition, the same figure
    report = estimate_by_cycle(object(), VisitLog(log), np.array([2]))[2]
    assert stats[FRESHNESS_PAGES_STAT] == report.pages
    assert stats[FRESHNESS_STAT] == pytest.approx(report.share, abs=1e-3)
    assert stats[FRESHNESS_LOW_STAT] <= stats[FRESHNESS_STAT] <= stats[FRESHNESS_HIGH_STAT]
    assert (
        f"recrawl cycle 2: estimated freshness of the {report.pages} known pages"
        in (runs[2]["log"])
    )


def test_the_freshness_estimate_is_the_one_estimator_over_the_known_urls():
    columns = {
        "n": np.array([4, 2, 0, 3, 0]),
        "X": np.array([2, 0, 0, 3, 0]),
        "first_cycle": np.array([1, 5, 9, 1, 9]),
        "last_visit_cycle": np.array([9, 9, 9, 4, -1]),
        "gone": np.array([False, False, False, True, False]),
    }
    est = freshness_estimate(columns, 9)
    # URL 3 is gone, URL 4 was never fetched: three known pages
    assert est.pages == 3 and est.observed == 2 and est.cycle == 9
    direct = estimate_freshness(
        columns["n"][:3], columns["X"][:3], columns["first_cycle"][:3],
        columns["last_visit_cycle"][:3], 9,
    )  # fmt: skip
    assert est.share == pytest.approx(direct.share)
    # all three were fetched in cycle 9: current at its end
    assert est.share == pytest.approx(1.0)
    assert freshness_estimate({k: v for k, v in columns.items() if k != "first_cycle"}, 9) is None
    tally = CycleTally(StatsStub())
    tally.note_state(columns, 11)  # cycle 11 opens: the estimate of cycle 10's end
    later = freshness_estimate(columns, 10)
    assert later.share < 1.0  # URL 0 changed at half its visits: maybe stale one cycle on
    assert tally.stats.values == {
        FRESHNESS_STAT: round(later.share, 4),
        FRESHNESS_LOW_STAT: round(later.low, 4),
        FRESHNESS_HIGH_STAT: round(later.high, 4),
        FRESHNESS_PAGES_STAT: 3,
        FRESHNESS_CYCLE_STAT: 10,
    }


class StatsStub:
    """crawler.stats's set_value, all the tally calls here."""

    def __init__(self) -> None:
        self.values: dict = {}

    def set_value(self, key, value) -> None:
        self.values[key] = value


def test_the_record_agrees_with_the_visit_log_and_the_server(crawled):
    runs, records, log = crawled[:3]
    assert [r.cycle for r in records] == [1, 2, 3]
    for rec, run in zip(records, runs, strict=True):
        s, in_cycle = rec.summary, log["cycle"] == rec.cycle
        assert rec.processes == 1
        # what the site served: the visits, and the boilerplate pairs' second fetches
        pairs = run["stats"].get("recrawl/boilerplate/pair_fetches", 0)
        assert s.fetched == int(in_cycle.sum()) == len(run["served"]) - pairs
        assert s.changed == int((log["changed"][in_cycle] == 1).sum())
        assert s.unchanged + s.not_modified == int((log["changed"][in_cycle] == 0).sum())
        assert s.not_modified == int((log["status"][in_cycle] == 304).sum())
        assert s.gone == int((log["status"][in_cycle] == 404).sum())
        assert s.started <= s.ended
    later = [r.summary for r in records[1:]]
    assert sum(s.changed for s in later) > 0 and sum(s.not_modified for s in later) > 0
    # /p11 is gone when next recrawled, if the scorer's picks reached it (ties among
    # pages observed as often are broken by URL id: by the order cycle 1 fetched them in)
    p11_later = int(((log["status"] == 404) & (log["cycle"] > 1)).sum())
    assert sum(s.gone for s in later) == p11_later <= 1
    assert sum(s.monitor for s in later) > 0 and sum(s.recrawl for s in later) > 0
    assert records[0].summary.start == 1  # the start request, apart from the budget
    for rec in records[1:]:
        assert rec.summary.budgeted <= rec.plan.budget == 6  # "used" is at most 100%


def test_the_plan_keeps_its_cut_off_and_picks(crawled):
    _, records, _, kept, found = crawled[:5]
    warmup = records[0].plan
    assert warmup.budget == 0 and warmup.cutoff is None and kept[1] is None
    for rec in records[1:]:
        plan = rec.plan
        ids, scores = kept[rec.cycle]
        assert plan.scorer == "cg" and plan.budget == 6 and plan.monitor > 0
        assert plan.picks == len(ids) > 0 and plan.candidates >= plan.picks
        assert plan.cutoff == pytest.approx(float(scores.min()))
        assert np.all(np.diff(scores) <= 0)  # best first
        assert rec.summary.recrawl <= plan.picks
    # a URL the scorer picked in cycle 3 is found with its rank and score
    scored = {url: got for url, got in found.items() if got is not None}
    assert scored, found
    for rank, score in scored.values():
        assert rank >= 1 and score >= records[2].plan.cutoff


def test_a_continuous_crawl_sums_up_each_cycle_at_its_roll_over(tmp_path):
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        "RECRAWL_CONTINUOUS": True,
        "RECRAWL_MAX_CYCLES": 3,
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": 4,
        "RECRAWL_CYCLE_SECONDS": 0.5,
        "RECRAWL_CYCLE_PERIOD": 0.5,
        "LOG_LEVEL": "INFO",
    }
    with LocalSite() as site:
        site.pages["/"] = index_page(8)
        for i in range(8):
            site.pages[f"/p{i}"] = topic_page(i, 0)
        result = run_crawl([site.url + "/"], settings, tmp_path, follow=True)
    lines = LINE.findall(result["log"])
    assert [int(line[0]) for line in lines] == [1, 2, 3]  # once each, in order
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        records = cycle_records(store)
        log = store.visit_log()
    assert [r.cycle for r in records] == [1, 2, 3]
    for rec in records:
        # a response in flight at a roll-over counts in its own cycle (a late summary)
        assert rec.summary.fetched == int((log["cycle"] == rec.cycle).sum())
    # the start request apart from the eight pages found (issue 26: it was counted new)
    assert records[0].summary.new == 8 and records[0].summary.start == 1
    assert records[0].plan.budget == 0
    assert all(0 < r.summary.budgeted <= r.plan.budget for r in records[1:])


def test_two_processes_on_one_redis_cycle_add_up_to_what_was_served(redis_db, tmp_path):  # noqa: F811
    with RunningSite(pages=150, seed=5) as site:
        names = ["a", "b"]
        procs = [
            start_crawl(site.base_url, redis_db.url, tmp_path, name, RECRAWL_WARMUP_CYCLES=1)
            for name in names
        ]
        stats = finish(procs, tmp_path, names)
        served = site.state.served(0)["served"]
    # the site logs its content pages; a redirect is followed, not kept (never a visit)
    pages_served = sum(1 for e in served if e["status"] != 301)
    with RedisHistoryStore(redis_db.url, key="site:history") as store:
        records = cycle_records(store)
        log = store.visit_log()
        urls = store.urls(log["url_id"])
    page_visits = sum(1 for u in urls if "/page/" in u)
    # one visit per page; a page served twice is a boilerplate pair's second fetch (no
    # visit), counted apart
    pages = {e["path"] for e in served if e["status"] != 301}
    pairs = sum(s.get("recrawl/boilerplate/pair_fetches", 0) for s in stats)
    assert page_visits == len(pages) and pages_served - len(pages) <= pairs
    # usually both processes share cycle 1; one may also finish it before the other starts
    assert sum(r.processes for r in records) == 2
    assert sum(s["recrawl/cycles_summarized"] for s in stats) == 2
    for rec in records:
        assert rec.summary.fetched == int((log["cycle"] == rec.cycle).sum())
        # the warm-up: every page is new, but the start request (one, by one process)
        assert rec.summary.new + rec.summary.start == rec.summary.fetched
        assert rec.plan is not None and rec.plan.cutoff is None  # warm-up: nothing scored
    assert sum(r.summary.fetched for r in records) == len(urls)
    assert sum(r.summary.fetched for r in records) == sum(
        s["recrawl/last_cycle/fetched"] for s in stats
    )
    for name in names:
        text = (tmp_path / f"{name}.log").read_text()
        assert len(re.findall(r"recrawl cycle \d+ done in \d+ s: this process fetched", text)) == 1


def test_the_line_counts_first_fetches_not_gone_urls_as_such():
    """A 404 has "gone" as its outcome (no first fetch); a failure that makes a URL gone
    is counted "failed" and "gone" too (one visit, two counters, still no first fetch)."""
    from scrapy import Request

    from scrapy_recrawl.core.budget import Budget
    from scrapy_recrawl.core.meta import META_KIND
    from scrapy_recrawl.cycle_summary import CycleTally, summary_line

    def tagged(url: str, kind: str) -> Request:
        return Request(url, meta={META_KIND: kind})

    tally = CycleTally(None)
    tally.count(tagged("https://a.test/new", "new"), 2, True, None)
    tally.count(tagged("https://a.test/404", "recrawl"), 2, False, "gone")
    tally.count(tagged("https://a.test/down", "recrawl"), 2, False, "failed", gone=True)
    tally.count(tagged("https://a.test/late", "new"), 1, True, None)  # a late visit of cycle 1
    # untagged: a request the spider sent outside the budget (its start request)
    tally.count(Request("https://a.test/"), 2, False, "unchanged")
    pushed: list[int] = []

    class Store:
        def side_push(self, table: str, cycle: int, record: bytes, keep: int) -> None:
            pushed.append(cycle)

    s = tally.end(Store(), 2, Budget(None, None), 1.0)
    assert pushed == [2, 1]
    assert (s.fetched, s.new, s.recrawl, s.start, s.failed, s.gone) == (4, 1, 2, 1, 1, 2)
    assert s.budgeted == 3
    assert tally._unobserved == {}  # the late cycle's count went with its summary
    line = summary_line(s, 5, 1.0, 1)
    assert "first fetch 1, changed 0" in line and line.endswith("failed 1, gone 2")
    assert "fetched 4 (3 of a budget of 5: recrawl 2, new 1, probe 0; outside" in line
    assert "monitor 0, start 1), backlog 0," in line
