"""``scrapy recrawl-report`` on a real crawl's store (SQLite, and Redis on a real
redis-server): the per-cycle table, CSV and JSON that parse, a plot with its three
series, one URL's story, and an export that ``recrawl-evolve --history`` accepts.

One small crawl per store (module-scoped): a local site of 24 pages crawled over 5
cycles, one ``scrapy crawl`` each, with ``RECRAWL_MONITOR_SHARE`` so there is a
monitoring sample (every page: each history complete, so the test is deterministic); a few pages change between cycles and one page's "Generated at"
stamp moves at every visit (boilerplate). The per-cycle records (plan, summary)
are written after the crawl with the real API (history/cycle_log.py).

The crawls are ``scrapy crawl`` processes; the ``recrawl-*`` commands run through
Scrapy's entry point in the test process (tests/cli_project.py ``scrapy_in_process``:
a process's status, stdout and stderr, without its seconds of start-up), except
:func:`test_user_mistakes_are_one_line`, the command line as a user types it.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from scrapy import Request
from scrapy.settings import Settings
from scrapy.utils.request import fingerprint

from scrapy_recrawl.insight.cycles import cycle_rows
from scrapy_recrawl.insight.log import VisitLog
from scrapy_recrawl.insight.plot import figure
from scrapy_recrawl.learn.histories import load
from scrapy_recrawl.stores import open_store

from .cli_project import make_project, scrapy, scrapy_in_process
from .helpers import LocalSite, Page
from .redis_server import RedisServer

# `make test` runs pytest-xdist with --dist loadgroup: the module is one group, so
# its two crawled stores (module-scoped) are made once, on one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_report")]

PAGES = 24
URLS = PAGES + 1  # "/" and /p/0.html (a 404: the root links to it) .. /p/23.html
CYCLES = 4
FAST = (1, 2, 3)  # change every cycle
STAMP = 5  # a "Generated at" time that moves at every visit
TINY = ["--population", "10", "--generations", "2", "--seeds", "1", "--keep-best", "5", "-q"]


def page(i: int, version: int, visit: int) -> bytes:
    stamp = f'<p class="generated">Generated at 12:{visit:02d}</p>' if i == STAMP else ""
    links = "".join(f'<a href="/p/{j}.html">page {j}</a> ' for j in range(PAGES)) if i == 0 else ""
    return (
        f"<html><body><h1>Page {i}</h1><p>Text of page {i}, version {version}: "
        f"{'lorem ipsum ' * (3 + version)}</p>{stamp}<div>{links}</div></body></html>"
    ).encode()


def crawl_site(project, store_setting: str) -> None:
    with LocalSite() as site:
        for cycle in range(CYCLES):
            site.pages["/"] = Page(page(0, 0, cycle))
            for i in range(1, PAGES):
                version = cycle if i in FAST else 0
                site.pages[f"/p/{i}.html"] = Page(page(i, version, cycle))
            run = scrapy(
                project, "crawl", "pages", "-a", f"start_url={site.url}/",
                "-s", store_setting, "-s", "RECRAWL_BUDGET=4", "-s", "RECRAWL_WARMUP_CYCLES=1",
            )  # fmt: skip
            assert run.returncode == 0, run.stderr[-3000:]


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def crawled(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"report-{request.param}")
    project = make_project(root, "RECRAWL_MONITOR_SHARE = 1.0\nRECRAWL_SCORER = 'gp4c'\n")
    if request.param == "sqlite":
        path = root / "history.sqlite3"
        setting = f"RECRAWL_STORE={path}"
        crawl_site(project, setting)
        yield project, setting
        return
    with RedisServer(appendonly=True) as server:  # a store that survives a restart
        setting = f"RECRAWL_STORE={server.url}"
        crawl_site(project, setting)
        yield project, setting


def report(crawled, *args):
    project, setting = crawled
    run = scrapy_in_process(project, "recrawl-report", "-s", setting, *args)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run


def test_the_table_shows_every_cycle_and_the_top_lists(crawled):
    out = report(crawled).stdout
    assert "Per cycle" in out and "Top changing URLs" in out and "Wasted on" in out
    for title in ("Top changing hosts", "Changes that look like boilerplate"):
        assert title in out
    assert "gp4c" in out and "/p/1.html" in out


def test_csv_and_json_parse(crawled):
    rows = list(csv.DictReader(io.StringIO(report(crawled, "--format", "csv").stdout)))
    assert [int(r["cycle"]) for r in rows] == list(range(1, CYCLES + 1))
    assert all(r["source"] == "record" and r["scorer"] == "gp4c" for r in rows)
    assert int(rows[0]["fetched"]) == URLS  # the first cycle fetched every page
    data = json.loads(report(crawled, "--format", "json").stdout)
    assert len(data["cycles"]) == CYCLES
    changing = {u["url"].rsplit("/", 1)[-1] for u in data["changing"]}
    assert {"1.html", "2.html", "3.html", "5.html"} <= changing
    assert all(u["changes"] == 0 for u in data["wasted"])
    # the start URL "/" never changes, but the spider fetches it: never the budget's waste
    assert data["wasted"] and not any(u["url"].endswith("/") for u in data["wasted"])
    # the start request counted apart; "used" is what the budget paid for, at most 100%
    assert rows[0]["start"] == "1" and int(rows[0]["new"]) == URLS - 1
    for r in rows[1:]:
        assert int(r["budget"]) == 4 and float(r["budget_used"]) <= 1.0, r
        assert r["backlog"] == "0"
    # the moving stamp is found, and the line that would silence it names its element
    (stamp,) = [b for b in data["boilerplate"] if b["url"].endswith(f"/p/{STAMP}.html")]
    assert '//p[@class="generated"]' in stamp["ignore_line"]
    assert stamp["ignore_line"].startswith("RECRAWL_IGNORE_XPATHS = [")
    since = csv.DictReader(io.StringIO(report(crawled, "--format", "csv", "--since", "3").stdout))
    assert [int(r["cycle"]) for r in since] == list(range(3, CYCLES + 1))
    csv_hosts = report(crawled, "--format", "csv", "--table", "hosts").stdout
    (host,) = csv.DictReader(io.StringIO(csv_hosts))
    assert host["host"] == "127.0.0.1" and int(host["urls"]) == URLS


@pytest.mark.plot
def test_plot_writes_a_png_with_three_series(crawled, tmp_path):
    run = report(crawled, "--plot", str(tmp_path / "out.png"))
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", run.stderr
    project, setting = crawled
    store = _open(setting)
    try:
        fig = figure(cycle_rows(store, VisitLog.read(store)), "t")
    finally:
        store.close()
    labels = [line.get_label() for ax in fig.axes for line in ax.get_lines()]
    assert labels == ["fetched", "changes found", "estimated freshness"]
    assert all(ax.get_ylabel() for ax in fig.axes) and fig.axes[-1].get_xlabel() == "cycle"


def test_url_shows_its_history_and_last_score(crawled):
    data = json.loads(report(crawled, "--format", "json").stdout)
    url = next(u["url"] for u in data["changing"] if u["url"].endswith("/p/1.html"))
    out = report(crawled, "--url", url).stdout
    assert "Visits" in out and "changed" in out and "scorer:" in out
    assert "score now" in out and "rank" in out
    story = json.loads(report(crawled, "--url", url, "--format", "json").stdout)
    assert len(story["visits"]) == story["visits_recorded"] and not story["cut"]
    # the whole site is the monitoring sample here: the scorer picked nothing (the
    # cut-off and a picked URL's rank are tested on a real crawl in test_cycle_summary)
    assert story["last_cycle"] == CYCLES and story["cutoff"] is None and story["monitored"]
    assert any("the scorer picked nothing" in line for line in story["why"])
    assert story["score"] is not None and story["rank_now"] >= 1
    assert any(f"cycle {CYCLES}:" in line for line in story["why"])


def test_export_is_read_by_recrawl_evolve(crawled, tmp_path):
    project, setting = crawled
    run = report(crawled, "--export", str(tmp_path / "changes.npz"))
    assert f"exported {PAGES} pages x {CYCLES} cycles" in run.stdout
    evolve = scrapy_in_process(project, "recrawl-evolve", "--history", str(tmp_path / "changes.npz"),
                    *TINY, "--folds", "3", "--warmup", "1")  # fmt: skip
    assert evolve.returncode == 0, evolve.stderr
    assert "expression:" in evolve.stdout
    # the CSV: read by the loader recrawl-evolve --history uses, to the same matrix
    report(crawled, "--export", str(tmp_path / "changes.csv"))
    with np.load(tmp_path / "changes.npz") as data:
        from_npz = data["changes"][np.argsort(data["pages"])]
    assert (load(str(tmp_path / "changes.csv")).changes == from_npz).all()
    run = report(crawled, "--export", str(tmp_path / "all.npz"), "--all")
    assert "warning: the whole history carries the scorer's bias" in run.stderr
    with np.load(tmp_path / "all.npz") as data:
        assert data["changes"].shape == data["observed"].shape
        assert data["changes"].shape[0] == URLS - 1  # every URL with a good fetch


def test_no_monitoring_sample_is_said_and_names_the_setting(crawled, tmp_path):
    project, setting = crawled
    # the crawls recorded their sample (share 1.0): a 0 on the command line changes nothing
    run = report(crawled, "-s", "RECRAWL_MONITOR_SHARE=0", "--export", str(tmp_path / "x.npz"))
    assert f"exported {PAGES} pages" in run.stdout
    # a store written before the sample was recorded: the settings' share, here 0
    _log_only_store(tmp_path / "old.sqlite3")
    run = scrapy_in_process(project, "recrawl-report", "-s", f"RECRAWL_STORE={tmp_path / 'old.sqlite3'}",
                 "-s", "RECRAWL_MONITOR_SHARE=0", "--export", str(tmp_path / "y.npz"))  # fmt: skip
    assert run.returncode == 1 and len(run.lines) == 1, run.stderr
    assert "RECRAWL_MONITOR_SHARE" in run.lines[0] and not (tmp_path / "y.npz").exists()


def _open(setting: str, read_only: bool = True):
    """The spider's store as the command opens it (history.open_store)."""
    spec = setting.split("=", 1)[1]
    store = open_store(Settings({"RECRAWL_STORE": spec}), "pages", read_only=read_only)
    store.open()
    return store


def _log_only_store(path) -> None:
    """Four cycles of three URLs, written as a crawl before per-cycle records would:
    one changes at every visit, one never, one answers 404 from cycle 3 on."""
    from scrapy_recrawl.history import SqliteHistoryStore, Visit

    with SqliteHistoryStore(str(path)) as store:
        store.advance_cycle()
        for c in range(1, 5):
            if c > 1:
                store.advance_cycle()
            for u, status in ((0, 200), (1, 200), (2, 404 if c >= 3 else 200)):
                changed = None if c == 1 or status != 200 else (u == 0)
                store.record(Visit(f"fp{u}".encode(), f"http://h{u % 2}/{u}", 100.0 * c + u,
                                   status, changed, gone=status == 404))  # fmt: skip


def test_a_store_without_records_shows_what_its_log_gives(tmp_path):
    path = tmp_path / "old.sqlite3"
    _log_only_store(path)
    store = _open(f"RECRAWL_STORE={path}")
    try:
        rows = cycle_rows(store, VisitLog.read(store))
    finally:
        store.close()
    assert [r.source for r in rows] == ["log"] * 4
    assert [(r.fetched, r.new, r.changed, r.unchanged, r.gone) for r in rows] == [
        (3, 3, 0, 0, 0), (3, 0, 1, 2, 0), (3, 0, 1, 1, 1), (3, 0, 1, 1, 1)
    ]  # fmt: skip
    assert all(r.recrawl is None and r.budget is None and r.scorer is None for r in rows)
    # at the end of cycle 2 every page was just fetched: the three are current
    assert rows[1].known_pages == 3 and rows[1].freshness == pytest.approx(1.0)
    # from cycle 3 on /2 is gone (404): two known pages, the estimate over them
    assert [r.known_pages for r in rows[2:]] == [2, 2]
    for r in rows[2:]:
        assert r.freshness_low <= r.freshness <= r.freshness_high
        assert r.freshness == pytest.approx(1.0)  # both fetched in the cycle itself
    project = make_project(tmp_path / "p")
    run = scrapy_in_process(project, "recrawl-report", "-s", f"RECRAWL_STORE={path}")
    assert run.returncode == 0, run.stderr
    assert "no per-cycle record in the store" in " ".join(run.stdout.split())


def test_a_cut_log_is_said(redis_db):  # noqa: F811 -- the fixture
    """A Redis store's log is capped (RECRAWL_REDIS_LOG_MAXLEN): the story says how many
    of the URL's visits it still keeps."""
    from scrapy_recrawl.history import Visit
    from scrapy_recrawl.history.redis import RedisHistoryStore
    from scrapy_recrawl.insight.story import find_url, story

    url = "http://h/a"
    with RedisHistoryStore(redis_db.url, key="cut:history", log_maxlen=10) as store:
        fp = fingerprint(Request(url))
        for k in range(300):  # MAXLEN ~ trims whole nodes (100 entries): many visits
            store.record(Visit(fp, url, float(k), 200, None if k == 0 else k % 2 == 0))
        store.flush()
        url_id, rec = find_url(store, url)
        s = story(store, VisitLog(store.visit_log([url_id])), url, url_id, rec,
                  Settings({"RECRAWL_MONITOR_SHARE": 0}))  # fmt: skip
    assert s.visits_recorded == 300 and s.cut and len(s.visits) < 300
    assert f"keeps {len(s.visits)} of its 300 visits" in s.notes[0]


def test_a_cut_sqlite_log_is_said(tmp_path):
    """A SQLite store's log is capped too (RECRAWL_SQLITE_LOG_MAXLEN): the story keeps the
    URL's record whole and says how many of its visits the log still keeps."""
    from scrapy_recrawl.history import SqliteHistoryStore, Visit
    from scrapy_recrawl.insight.story import find_url, story

    url = "http://h/a"
    with SqliteHistoryStore(tmp_path / "h.sqlite3", log_maxlen=40, flush_every=7) as store:
        fp = fingerprint(Request(url))
        for k in range(300):
            store.record(Visit(fp, url, float(k), 200, None if k == 0 else k % 2 == 0))
        store.flush()
        url_id, rec = find_url(store, url)
        s = story(store, VisitLog(store.visit_log([url_id])), url, url_id, rec,
                  Settings({"RECRAWL_MONITOR_SHARE": 0}))  # fmt: skip
    assert (rec.visits, rec.n, rec.X) == (300, 299, 149)  # the record: every visit
    assert s.visits_recorded == 300 and s.cut and len(s.visits) == 40
    assert "keeps 40 of its 300 visits" in s.notes[0]


def test_evolve_warns_about_a_history_exported_with_all(tmp_path):
    # an --all export keeps which page-cycles were fetched: recrawl-evolve says the rest
    # read as "no change" (the crawl's own bias), once, in its history line
    changes = np.zeros((4, 6), dtype=np.int8)
    observed = np.ones((4, 6), dtype=bool)
    observed[:2, 3:] = False
    np.savez(tmp_path / "all.npz", changes=changes, observed=observed)
    assert (
        "only 75% of this history's page-cycles were fetched"
        in load(str(tmp_path / "all.npz")).note
    )
    np.savez(tmp_path / "sample.npz", changes=changes, observed=np.ones((4, 6), dtype=bool))
    assert load(str(tmp_path / "sample.npz")).note == ""


def test_user_mistakes_are_one_line(crawled, tmp_path):
    project, setting = crawled
    run = scrapy(project, "recrawl-report", "-s", setting, "--since", "99")
    assert run.returncode == 1 and len(run.lines) == 1, run.stderr
    assert "no cycle from it on; the store's last cycle is 4" in run.lines[0]
    # a misspelled name is warned about (it would read the default store without a word)
    run = scrapy(project, "recrawl-report", "-s", setting, "-s", "RECRAWL_STOR=x.sqlite3")
    assert run.returncode == 0 and "RECRAWL_STORE" in run.stderr and "RECRAWL_STOR " in run.stderr


def test_a_bad_scorer_setting_for_url_is_one_line(crawled):
    """--url scores the URL with the project's scorer settings: a bad one is named in
    one line with a non-zero exit, as a crawl names it, not a traceback."""
    project, setting = crawled
    data = json.loads(report(crawled, "--format", "json").stdout)
    url = data["changing"][0]["url"]
    for bad, named in (
        (["-s", "RECRAWL_SCORER=burst", "-s", "RECRAWL_BURST_TAU=abc"], "RECRAWL_BURST_TAU"),
        (["-s", "RECRAWL_SCORER=burst", "-s", "RECRAWL_BURST_TAU=inf"], "RECRAWL_BURST_TAU"),
        (["-s", "RECRAWL_SCORER=CGp*(t + 4*burstt)"], "did you mean 'burst'"),
    ):
        run = scrapy_in_process(project, "recrawl-report", "-s", setting, *bad, "--url", url)
        assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
        assert len(run.lines) == 1 and named in run.lines[0], run.stderr
