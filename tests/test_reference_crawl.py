"""Real ``scrapy crawl`` cycles of the reference site, scored against its truth (issue 26).

Each test runs a user's project (the example ``shop`` spider and the add-on line:
example_project/reference/crawl.py) for a few cycles against a reference shop served
from a thread, moving the site one day on after each cycle, and scores the store's
visit log with ``example_project.reference.score``:

* change detection with no configuration: precision and recall of ``changed`` on
  product and category pages from the third cycle on, on SQLite and on Redis;
* an edited ``RECRAWL_IGNORE_XPATHS`` is not a change (SQLite and Redis);
* the freshness estimate against the true freshness of the known pages;
* without boilerplate learning the same crawl flags unchanged pages (the detection
  test can fail).

The shop is smaller than the default (60 products in 6 categories, 67 pages) so that a
cycle takes a couple of seconds; the freshness test uses the default shop (215 pages),
the one the issue's bound is stated on.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from example_project.reference import (
    Detection,
    RunningReferenceSite,
    detection,
    freshness_by_day,
    visits_from_store,
)
from example_project.reference.crawl import REPO, make_project, run_cycles
from scrapy_recrawl.cycle_summary import (
    FRESHNESS_CYCLE_STAT,
    FRESHNESS_HIGH_STAT,
    FRESHNESS_LOW_STAT,
    FRESHNESS_STAT,
)
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.insight.cycles import estimate_by_cycle
from scrapy_recrawl.insight.log import VisitLog

pytestmark = pytest.mark.slow

SMALL_SHOP = {"products": 60, "categories": 6}
PAGES = {"product", "category"}
#: Detection is not configured in these crawls. The budget is raised from the default
#: 5% (3 or 4 pages of 67) to half the shop so that each budgeted cycle compares many
#: pages, unchanged ones among them: at 5% the scorer refetches mostly pages that did
#: change, which would hardly test precision.
HALF = 'RECRAWL_BUDGET = "50%"\n'


class Backend:
    """Where a test's history lives: a SQLite file, or a redis-server with the
    ``RedisRecrawlScheduler``."""

    def __init__(self, kind: str, tmp_path: Path, redis_url: str | None = None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.redis_url = redis_url

    @property
    def store(self) -> str:
        return str(self.tmp_path / "history.sqlite3") if self.kind == "sqlite" else "redis"

    @property
    def settings(self) -> str:
        if self.kind == "sqlite":
            return ""
        return (
            f'SCHEDULER = "scrapy_recrawl.RedisRecrawlScheduler"\nREDIS_URL = {self.redis_url!r}\n'
        )

    @property
    def cli(self) -> list[str]:
        """The ``-s`` options a ``scrapy recrawl-*`` command needs to find the store."""
        return ["--spider", "shop", "-s", f"RECRAWL_STORE={self.store}"]

    def open(self):
        if self.kind == "sqlite":
            return SqliteHistoryStore(self.store, read_only=True)
        return RedisHistoryStore(self.redis_url, key="shop:history")


@pytest.fixture(params=["sqlite", "redis"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return Backend("sqlite", tmp_path)
    server = request.getfixturevalue("redis_db")  # a real redis-server, emptied
    return Backend("redis", tmp_path, server.url)


def cycles(
    running: RunningReferenceSite,
    backend: Backend,
    project: Path,
    n: int,
) -> list[dict]:
    return run_cycles(
        running.site,
        running.base_url,
        "shop",
        n,
        project,
        backend.store,
        stats_file=backend.tmp_path / "stats.json",
    )


def scored(backend: Backend, running: RunningReferenceSite, from_day: int) -> Detection:
    with backend.open() as store:
        visits = visits_from_store(store)
    return detection(running.site.changes(), visits, from_day=from_day, kinds=PAGES)


def describe(d: Detection) -> str:
    return (
        f"precision {d.precision} recall {d.recall} "
        f"(tp {d.tp} fp {d.fp} fn {d.fn} tn {d.tn}, unjudged {d.unjudged})"
    )


def recrawl_report(project: Path, backend: Backend) -> dict:
    """``scrapy recrawl-report --format json`` in the project, as a user runs it."""
    cmd = [sys.executable, "-m", "scrapy", "recrawl-report", "--format", "json", *backend.cli]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
    out = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


# ---------------------------------------------------------------- detection, zero config


def test_detection_with_no_configuration_from_the_third_cycle(backend, tmp_path):
    project = make_project(tmp_path / "project", HALF + backend.settings)
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        stats = cycles(running, backend, project, 5)
        d = scored(backend, running, from_day=2)  # cycle c is day c - 1: cycles 3..5
    print(f"\n{backend.kind}: product and category pages, cycles 3-5: {describe(d)}")
    assert sum(s.get("recrawl/boilerplate/pair_fetches", 0) for s in stats) > 0  # it learned
    assert d.compared >= 60  # each budgeted cycle compared a good share of the shop
    assert d.tn >= 20  # ... unchanged pages among them: precision is tested
    assert d.tp >= 10  # ... and real changes: recall is tested
    assert d.precision is not None and d.precision >= 0.95, describe(d)
    assert d.recall is not None and d.recall >= 0.95, describe(d)


def test_without_learning_the_boilerplate_reads_as_change(tmp_path):
    """The same crawl as above with ``RECRAWL_LEARN_BOILERPLATE = False``: the render
    time, tokens, counters and rotating blocks make unchanged pages read as changed, so
    the detection test above is one that can fail."""
    backend = Backend("sqlite", tmp_path)
    settings = HALF + "RECRAWL_LEARN_BOILERPLATE = False\n"
    project = make_project(tmp_path / "project", settings)
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        stats = cycles(running, backend, project, 5)
        d = scored(backend, running, from_day=2)
    print(f"\nno learning: product and category pages, cycles 3-5: {describe(d)}")
    assert sum(s.get("recrawl/boilerplate/pair_fetches", 0) for s in stats) == 0
    assert d.compared >= 60
    assert d.precision is not None and d.precision < 0.5, describe(d)


# ------------------------------------------------------ an edited ignore list is no change


def test_editing_the_ignore_list_between_cycles_is_not_a_change(backend, tmp_path):
    """Three cycles learning the boilerplate, then the user follows the report's advice
    and pins what was learned (``RECRAWL_IGNORE_XPATHS``, the report's pin line for
    product pages) in settings.py: the next two cycles flag no page changed that did
    not change, and the kept copies are signed again under the new rules."""
    project = make_project(tmp_path / "project", HALF + backend.settings)
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        cycles(running, backend, project, 3)
        report = recrawl_report(project, backend)
        pins = [s for s in report["learned"] if s["section"].endswith("/shop/product")]
        assert pins and pins[0]["volatile"], report["learned"]
        pin_line = pins[0]["pin_line"]
        assert pin_line.startswith("RECRAWL_IGNORE_XPATHS = [")
        make_project(project, HALF + backend.settings + pin_line + "\n")  # settings.py edited
        stats = cycles(running, backend, project, 2)
        edited = scored(backend, running, from_day=3)  # cycles 4 and 5
        before = scored(backend, running, from_day=2)
    print(f"\n{backend.kind}: {pin_line}; cycles 4-5: {describe(edited)}")
    assert stats[0].get("recrawl/resigned", 0) > 0, stats[0]  # signed again, not compared raw
    assert stats[0].get("recrawl/rebaselined", 0) == 0  # copies are kept: no lost observation
    assert edited.compared >= 40
    assert edited.fp == 0, describe(edited)  # the edit itself is no change
    assert edited.recall is not None and edited.recall >= 0.95, describe(edited)
    assert before.fp == 0, describe(before)


def test_the_reports_pin_line_with_learning_off_does_what_was_learned(tmp_path):
    """docs/detection.md: the report's lines pin what was learned. A fresh store, learning
    off, the XPaths of the report's lines (one per section: the setting is global, so
    their union): text-volatile parts and, as ``<path>/@*``, the attributes of the links
    that carry session ids. Detection is as exact as with learning on."""
    backend = Backend("sqlite", tmp_path / "learn")
    backend.tmp_path.mkdir()
    project = make_project(tmp_path / "learn" / "project", HALF)
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        cycles(running, backend, project, 2)
        report = recrawl_report(project, backend)
    xpaths: list[str] = []
    for section in report["learned"]:
        line = section["pin_line"]
        assert line.startswith("RECRAWL_IGNORE_XPATHS = "), line
        xpaths += [x for x in ast.literal_eval(line.split("=", 1)[1].strip()) if x not in xpaths]
    assert any(x.endswith("/@*") for x in xpaths), xpaths  # the session ids
    pin = f"RECRAWL_IGNORE_XPATHS = {xpaths!r}"
    pinned = Backend("sqlite", tmp_path / "pinned")
    pinned.tmp_path.mkdir()
    settings = HALF + "RECRAWL_LEARN_BOILERPLATE = False\n" + pin + "\n"
    project = make_project(tmp_path / "pinned" / "project", settings)
    with RunningReferenceSite(seed=1, sites=["shop"], **SMALL_SHOP) as running:
        stats = cycles(running, pinned, project, 4)
        d = scored(pinned, running, from_day=1)  # cycles 2-4: no pair needed, none learned
    print(f"\n{pin}\nlearning off, pinned: cycles 2-4: {describe(d)}")
    assert sum(s.get("recrawl/boilerplate/pair_fetches", 0) for s in stats) == 0
    assert d.compared >= 100
    assert d.precision is not None and d.precision >= 0.95, describe(d)
    assert d.recall is not None and d.recall >= 0.95, describe(d)


# ------------------------------------------------------------------ the freshness estimate

#: The products of odd categories send Last-Modified, and they were listed before the
#: crawl began (example_project/reference/shop.py): their ages at the first fetch give
#: the host's distribution of rates its slow part (scoring/freshness.py, "Before the
#: first fetch"). Without them, the ~180 quiet products observed once over one day left
#: that shape to the EM's start: MAE 0.065-0.086, always high (docs/freshness.md).


def freshness_figures(tmp_path: Path, n: int) -> list[tuple[int, float, float, str]]:
    """``n`` cycles of the default reference shop with only the add-on line; per cycle
    (cycle, true freshness, estimate, where the estimate came from)."""
    backend = Backend("sqlite", tmp_path)
    project = make_project(tmp_path / "project")
    with RunningReferenceSite(seed=1, sites=["shop"]) as running:
        stats = cycles(running, backend, project, n)
        truth = running.site.changes()
    with SqliteHistoryStore(backend.store, read_only=True) as store:
        visits = visits_from_store(store)
        report = estimate_by_cycle(store, VisitLog.read(store), list(range(1, n + 1)))
    true = freshness_by_day(truth, visits, range(n))
    stat = {int(s[FRESHNESS_CYCLE_STAT]): s for s in stats if FRESHNESS_CYCLE_STAT in s}
    out = []
    for c in range(1, n + 1):
        if c in stat:  # the next cycle's opening computed it (docs/freshness.md)
            s = stat[c]
            assert s[FRESHNESS_LOW_STAT] <= s[FRESHNESS_STAT] <= s[FRESHNESS_HIGH_STAT]
            # the crawl's stat and recrawl-report's figure are one definition
            assert abs(s[FRESHNESS_STAT] - report[c].share) < 1e-3, (c, s, report[c])
            out.append((c, true[c - 1], float(s[FRESHNESS_STAT]), "stat"))
        else:  # the last cycle: recrawl-report's computation
            out.append((c, true[c - 1], report[c].share, "report"))
    return out


def test_freshness_estimate_tracks_the_truth_on_the_reference_shop(tmp_path):
    """Issue 26: within +-0.05 of the true freshness of the known pages in every cycle,
    mean absolute error <= 0.03 over cycles 3..N, with default settings."""
    n = 15  # the cycles 3-15
    rows = freshness_figures(tmp_path, n)
    table = "\n".join(
        f"  cycle {c:2d}: true {t:.3f} estimate {e:.3f} ({src})" for c, t, e, src in rows
    )
    print(f"\nreference shop, only the add-on line, {n} cycles:\n{table}")
    errs = [abs(e - t) for c, t, e, _ in rows if c >= 3]
    mae = sum(errs) / len(errs)
    print(f"MAE over cycles 3-{n}: {mae:.4f}, largest error {max(errs):.4f}")
    for c, t, e, _ in rows:
        assert abs(e - t) <= 0.05, f"cycle {c}: estimate {e:.3f}, true {t:.3f}\n{table}"
    assert mae <= 0.03, f"MAE {mae:.4f} over cycles 3-{n}\n{table}"


def test_freshness_estimate_on_the_reference_news_site(tmp_path):
    """The news site makes pages: its articles' dates are their publication, not
    changes. Read as changes (the classic estimator) the estimate fell to 0.30 against
    0.94 true (MAE 0.43); read as creations on a host seen making pages, it stays near
    the truth (0.021 on this seed). The issue's bound (0.03) is not met on every seed
    (docs/freshness.md: 0.019-0.065 over eight, the chance floor 0.006-0.036): this
    pins the reading with a margin, not the bound."""
    n = 15
    backend = Backend("sqlite", tmp_path)
    project = make_project(tmp_path / "project")
    with RunningReferenceSite(seed=1, sites=["news"]) as running:
        run_cycles(running.site, running.base_url, "news", n, project, backend.store,
                   stats_file=tmp_path / "stats.json")  # fmt: skip
        truth = running.site.changes()
    with SqliteHistoryStore(backend.store, read_only=True) as store:
        visits = visits_from_store(store)
        report = estimate_by_cycle(store, VisitLog.read(store), list(range(1, n + 1)))
    true = freshness_by_day(truth, visits, range(n))
    rows = [(c, true[c - 1], report[c].share) for c in range(3, n + 1)]
    table = "\n".join(f"  cycle {c:2d}: true {t:.3f} estimate {e:.3f}" for c, t, e in rows)
    mae = sum(abs(e - t) for _, t, e in rows) / len(rows)
    print(f"\nreference news, only the add-on line:\n{table}\nMAE {mae:.4f}")
    assert mae <= 0.05, table
    assert all(abs(e - t) <= 0.1 for _, t, e in rows), table
