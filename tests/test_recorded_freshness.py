"""The crawl's own freshness estimate kept in each cycle's record (schema version 8: the
side table ``cycle_freshness``, history/cycle_log.py) and read by ``recrawl-report``
instead of refitting it (insight/cycles.py).

* On real crawls of both backends the report's figure of each cycle is the one the
  crawl computed as the next cycle opened: equal to its stat (rounded as the stat is),
  read from the record, not fitted again; the last cycle, which no opening estimated,
  is fitted from the log.
* A store of a build before the first release (schema version 7) is refused, not
  upgraded: tests/test_sqlite_baseline.py, tests/test_redis_migrations.py.
* A record read back from Redis that is not a share (out of [0, 1], NaN, not a record)
  is ignored with a warning naming the cycle, and that cycle fitted from the log.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from example_project.site import RunningSite
from scrapy_recrawl.core.groups import GroupIndex
from scrapy_recrawl.cycle_summary import (
    FRESHNESS_CYCLE_STAT,
    FRESHNESS_HIGH_STAT,
    FRESHNESS_LOW_STAT,
    FRESHNESS_PAGES_STAT,
    FRESHNESS_STAT,
    CycleTally,
)
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.cycle_log import (
    FRESHNESS_TABLE,
    recorded_freshness,
)
from scrapy_recrawl.history.records import pack_record
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.insight.cycles import cycle_rows, estimate_by_cycle
from scrapy_recrawl.insight.log import VisitLog

from .fixtures.visit_plan import CYCLES as V7_CYCLES
from .fixtures.visit_plan import URLS as V7_URLS
from .fixtures.visit_plan import visit as v7_visit
from .helpers import REPO, LocalSite, index_page, run_crawl, topic_page
from .test_redis_crawl import finish, start_crawl

FIXTURES = Path(__file__).parent / "fixtures"
STATS = (FRESHNESS_STAT, FRESHNESS_LOW_STAT, FRESHNESS_HIGH_STAT)


def crawl_stats(runs: list[dict]) -> dict[int, dict]:
    """``{cycle: stats}``: the freshness figures each run's opening computed (of the
    cycle before it)."""
    return {int(s[FRESHNESS_CYCLE_STAT]): s for s in runs if FRESHNESS_CYCLE_STAT in s}


def check_report_is_the_crawls(store: object, stats: dict[int, dict], last: int) -> None:
    """Each cycle the crawl estimated: recorded, and the report's figure is the record's,
    the crawl's stat once rounded; the last cycle fitted from the log."""
    kept = recorded_freshness(store)
    assert sorted(kept) == sorted(stats) == list(range(1, last)), (sorted(kept), sorted(stats))
    log = VisitLog.read(store)
    rows = {r.cycle: r for r in cycle_rows(store, log)}
    fitted = estimate_by_cycle(store, log, np.arange(1, last + 1))
    for c, s in stats.items():
        rec, row = kept[c], rows[c]
        assert row.freshness_source == "record"
        got = (row.freshness, row.freshness_low, row.freshness_high)
        assert got == (rec.share, rec.low, rec.high)
        assert [round(x, 4) for x in got] == [s[k] for k in STATS], (c, got, s)
        assert row.known_pages == rec.pages == s[FRESHNESS_PAGES_STAT]
        # the one estimator: the log's fit of that cycle is the same figure
        assert fitted[c].share == pytest.approx(rec.share, abs=1e-9), c
        assert fitted[c].pages == rec.pages
    tail = rows[last]
    assert tail.freshness_source == "log" and last not in kept
    assert tail.freshness == fitted[last].share and tail.known_pages == fitted[last].pages


# ------------------------------------------------------------------ real crawls


@pytest.mark.slow
def test_a_sqlite_crawl_keeps_each_cycle_estimate_and_the_report_shows_it(tmp_path):
    """Four cron-style cycles of a 16-page site (a warm-up, then a budget of 6 and a
    monitoring sample; a third of the pages change every cycle); then
    ``scrapy recrawl-report --format json`` as a user runs it."""
    pages, store_path = 16, tmp_path / "history.sqlite3"
    settings = {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(store_path),
        "RECRAWL_WARMUP_CYCLES": 1,
        "RECRAWL_BUDGET": 6,
        "RECRAWL_MONITOR_SHARE": 0.2,
        "RECRAWL_SCORER": "cg",
        "LOG_LEVEL": "INFO",
    }
    runs = []
    with LocalSite() as site:
        site.pages["/"] = index_page(pages)
        for i in range(pages):
            site.pages[f"/p{i}"] = topic_page(i, 0)
        for cycle in (1, 2, 3, 4):
            runs.append(run_crawl([site.url + "/"], settings, tmp_path, follow=True)["stats"])
            for i in range(cycle % 3, pages, 3):
                site.pages[f"/p{i}"] = topic_page(i, cycle)
    stats = crawl_stats(runs)
    with SqliteHistoryStore(store_path, read_only=True) as store:
        check_report_is_the_crawls(store, stats, last=4)
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "recrawl-report", "-s", f"RECRAWL_STORE={store_path}"]
        + ["--format", "json"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {r["cycle"]: r for r in json.loads(out.stdout)["cycles"]}
    for c, s in stats.items():
        assert rows[c]["freshness_source"] == "record"
        assert [round(rows[c][k], 4) for k in ("freshness", "freshness_low", "freshness_high")] == [
            s[k] for k in STATS
        ]
    assert rows[4]["freshness_source"] == "log" and rows[4]["freshness"] is not None


@pytest.mark.slow
def test_a_redis_crawl_keeps_each_cycle_estimate_and_the_report_shows_it(redis_db, tmp_path):
    """Three cycles of the example site (60 pages, one day on after each), one
    RedisRecrawlScheduler process each, the store in Redis."""
    names = []
    with RunningSite(pages=60, seed=5) as site:
        for cycle in (1, 2, 3):
            name = f"c{cycle}"
            proc = start_crawl(
                site.base_url,
                redis_db.url,
                tmp_path,
                name,
                RECRAWL_WARMUP_CYCLES=1,
                RECRAWL_BUDGET=12,
                RECRAWL_MONITOR_SHARE=0.1,
            )
            names.append(finish([proc], tmp_path, [name])[0])
            site.state.advance(1)
    stats = crawl_stats(names)
    with RedisHistoryStore(redis_db.url, key="site:history") as store:
        assert store.cycle == 3
        check_report_is_the_crawls(store, stats, last=3)


# ------------------------------------------------------------------ what Redis hands back


def test_a_recorded_estimate_that_is_not_a_share_is_ignored_with_a_warning(redis_db, caplog):
    """Values written into the Redis hash by someone else: out of [0, 1], NaN, an
    interval not around the share, bytes that are no record. Each is read as absent
    (one warning naming its cycle) and that cycle fitted from the log; nothing read back
    is evaluated."""
    with RedisHistoryStore(redis_db.url, key="books:history") as store:
        store.claim("books")
        tally, groups = CycleTally(None), GroupIndex()
        for cycle in range(1, 7):
            store.flush()
            store.advance_cycle()
            tally.open_cycle(store, store.arrays(), groups)  # as a crawl opens it
            for u in range(V7_URLS):
                v = v7_visit(u, cycle)
                if v is not None:
                    store.record(Visit(**v))
        store.flush()
        good = recorded_freshness(store)
        assert sorted(good) == [1, 2, 3, 4, 5]
        client = redis_db.client()
        [key] = [k for k in client.keys("*") if k.endswith(f":side:{FRESHNESS_TABLE}".encode())]
        bad = {
            1: pack_record({"cycle": 1, "share": 1.5, "low": 0.9, "high": 1.6, "pages": 24}),
            2: pack_record(
                {"cycle": 2, "share": float("nan"), "low": 0.5, "high": 0.9, "pages": 24}
            ),
            3: b"__import__('os').system('echo pwned')",
            4: pack_record({"cycle": 4, "share": 0.9, "low": 0.95, "high": 0.99, "pages": 24}),
        }
        client.hset(key, mapping={str(c).encode(): v for c, v in bad.items()})
        client.close()
        with caplog.at_level(logging.WARNING, logger="scrapy_recrawl.history"):
            kept = recorded_freshness(store)
            log = VisitLog.read(store)
            rows = {r.cycle: r for r in cycle_rows(store, log)}
        assert sorted(kept) == [5] and kept[5] == good[5]
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        for c in bad:
            assert any(f"freshness estimate of cycle {c} is not read" in m for m in warned), c
        fitted = estimate_by_cycle(store, log, np.arange(1, 7))
        for c in (1, 2, 3, 4, 6):
            assert rows[c].freshness_source == "log"
            assert rows[c].freshness == fitted[c].share
            if c in good:  # the figure the record held before it was overwritten
                assert rows[c].freshness == pytest.approx(good[c].share, abs=1e-9)
        assert rows[5].freshness_source == "record" and rows[5].freshness == good[5].share


def test_an_estimate_the_store_cannot_keep_is_said_and_the_cycle_goes_on(tmp_path, caplog):
    """The store refuses the write (here: open read-only, a real refusal): one error line
    naming the cycle, the estimate still returned (the stats have it), nothing kept; the
    report fits that cycle from the log."""
    path = tmp_path / "history.sqlite3"
    with SqliteHistoryStore(path) as writer:  # six cycles crawled, no estimate kept
        writer.claim("books")
        for cycle in range(1, V7_CYCLES + 1):
            writer.advance_cycle()
            for u in range(V7_URLS):
                v = v7_visit(u, cycle)
                if v is not None:
                    writer.record(Visit(**v))
    with SqliteHistoryStore(path, read_only=True) as store:
        tally = CycleTally(None)
        with caplog.at_level(logging.ERROR, logger="scrapy_recrawl.scheduler"):
            est = tally.open_cycle(store, store.arrays(), GroupIndex())
        # the store's cycle is 6: the opening it would make is cycle 6's, estimating 5
        assert est is not None and est.cycle == V7_CYCLES - 1
        assert recorded_freshness(store) == {}
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line.startswith(f"recrawl: could not keep the freshness estimate of cycle {est.cycle}")
    assert "read-only" in line
