"""The recrawl scheduler in real crawls (subprocesses) of a real local HTTP server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from scrapy_recrawl.history import SqliteHistoryStore

from .helpers import REPO, SPIDER_SCRIPT, LocalSite, Page, run_crawl

pytestmark = pytest.mark.slow


def page(i: int, version: int = 0, links=()) -> Page:
    body = "".join(f'<a href="/p{j}">p{j}</a>' for j in links)
    text = f"Page {i} talks about topic {i} in version {version} with enough words to shingle."
    return Page(f"<html><body><p>{text}</p>{body}</body></html>".encode(), etag=f'"{i}-{version}"')


def index(n: int) -> Page:
    links = "".join(f'<a href="/p{j}">p{j}</a>' for j in range(n))
    return Page(f"<html><body><h1>Index</h1>{links}</body></html>".encode())


def settings_for(tmp_path, **extra):
    return {
        "ADDONS": {"scrapy_recrawl.RecrawlAddon": 100},
        "RECRAWL_STORE": str(tmp_path / "history.sqlite3"),
        **extra,
    }


def page_items(result):
    return [i for i in result["items"] if "/p" in i["url"]]


@pytest.fixture
def site():
    with LocalSite() as s:
        s.pages["/"] = index(20)
        for i in range(20):
            s.pages[f"/p{i}"] = page(i)
        yield s


def test_warmup_then_budget_then_new_share_and_frontier(site, tmp_path):
    settings = settings_for(tmp_path, RECRAWL_BUDGET=5, RECRAWL_NEW_SHARE=0.2)
    start = [site.url + "/"]
    for cycle in (1, 2):  # warm-up: every page, every cycle
        result = run_crawl(start, settings, tmp_path, follow=True)
        assert len(page_items(result)) == 20
        assert result["stats"]["recrawl/cycle"] == cycle
    # pages 0-4 change every cycle from now on; 4 new pages appear on the index
    site.pages["/"] = index(24)
    for i in range(20, 24):
        site.pages[f"/p{i}"] = page(i)
    seen_changed: set[str] = set()
    for v in (1, 2):
        for i in range(5):
            site.pages[f"/p{i}"] = page(i, version=v)
        site.log.clear()
        result = run_crawl(start, settings, tmp_path, follow=True)
        # budget 5 = 4 recrawls (any known URL, the index included) + 1 new (round(5 * 0.2));
        # in cycle 4 three new URLs wait from cycle 3: the new share grows to 2 (half the
        # budget, rounded down: core/budget.py new_pages) and the recrawls keep 3
        recrawls, news = (4, 1) if v == 1 else (3, 2)
        recrawled = [i for i in result["items"] if i["rank"] is not None]
        new = [
            i
            for i in page_items(result)
            if i["rank"] is None and int(i["url"].rsplit("p", 1)[1]) >= 20
        ]
        assert len(recrawled) == recrawls, result["items"]
        assert len(new) == news, result["items"]
        start_fetched = 0 if any(i["url"].endswith("/") for i in recrawled) else 1
        assert len(site.log) == 5 + start_fetched  # nothing else was fetched
        items = page_items(result)
        assert all(i["tag"] == "kept" for i in items)  # meta survives the stored request
        # cycle 3 queues 5 (no frontier yet, new URLs may never come); 4 are handed out;
        # cycle 4 queues 3 (the backlog claims the new share)
        assert result["stats"]["recrawl/scheduled"] == (5 if v == 1 else 3)
        assert result["stats"]["recrawl/backlog"] == (3 if v == 1 else 1)
        assert result["stats"]["recrawl/known_skipped"] >= 10  # the index's links to known pages
        names = {i["url"].rsplit("/", 1)[1] for i in recrawled}
        if v == 2:
            # the pages seen changing last cycle score highest now: as many of them as
            # the recrawls (3 now) have room for
            top = min(len(seen_changed), recrawls)
            assert len(names & seen_changed) == top, (seen_changed, names)
        seen_changed = {i["url"].rsplit("/", 1)[1] for i in recrawled if i["recrawl"]["changed"]}
        assert seen_changed <= {f"p{j}" for j in range(5)}
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        assert store.cycle == 4
        # 4 new pages discovered, 3 fetched; the other one waits in the frontier
        assert store.frontier_size() == 1
        log = store.visit_log()
        for cycle in (3, 4):
            assert 5 <= (log["cycle"] == cycle).sum() <= 6  # 5 budgeted (+ the start request)


def test_restart_after_sigkill_continues_cycles_and_keeps_the_store_consistent(site, tmp_path):
    # a slow page keeps the crawl running while we kill it
    settings = settings_for(tmp_path, RECRAWL_FLUSH_EVERY=1, DOWNLOAD_DELAY=0.2)
    run_crawl([site.url + "/"], settings, tmp_path, follow=True)

    proc = subprocess.Popen(
        [
            sys.executable,
            str(SPIDER_SCRIPT),
            json.dumps({"urls": [site.url + "/"], "settings": settings, "follow": True}),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while len(site.log) < 25 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(site.log) >= 25, "the second crawl did not start"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        assert store.cycle == 2
        log = store.visit_log()
        arr = store.arrays()
        # no per-URL counter ahead of the visit log
        for uid, n in zip(arr.ids.tolist(), arr.columns["n"].tolist(), strict=True):
            observed = ((log["url_id"] == uid) & (log["changed"] >= 0)).sum()
            assert n == observed
    result = run_crawl([site.url + "/"], settings, tmp_path, follow=True)
    assert result["stats"]["recrawl/cycle"] == 3


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("RECRAWL_BUDGET", -5, "RECRAWL_BUDGET=-5"),
        ("RECRAWL_BUDGET", "lots", "RECRAWL_BUDGET='lots'"),
        ("RECRAWL_SCORER", "no_such_scorer", "RECRAWL_SCORER"),
        ("RECRAWL_SCORER", "__import__('os')", "RECRAWL_SCORER"),
        ("RECRAWL_NEW_SHARE", 1.5, "RECRAWL_NEW_SHARE=1.5"),
    ],
)
def test_bad_settings_stop_the_crawl_at_start(site, tmp_path, setting, value, message):
    with pytest.raises(AssertionError, match="crawl failed") as err:
        run_crawl([site.url + "/"], settings_for(tmp_path, **{setting: value}), tmp_path)
    assert message in str(err.value)
    assert site.log == []  # nothing was fetched


def test_continuous_mode_rolls_cycles_until_max_cycles(site, tmp_path):
    settings = settings_for(
        tmp_path,
        RECRAWL_CONTINUOUS=True,
        RECRAWL_MAX_CYCLES=4,
        RECRAWL_WARMUP_CYCLES=1,
        RECRAWL_BUDGET=6,
        RECRAWL_CYCLE_SECONDS=1,
        RECRAWL_CYCLE_PERIOD=1,  # one cycle a second
    )
    result = run_crawl([site.url + "/"], settings, tmp_path, follow=True, timeout=120)
    assert result["stats"]["recrawl/cycle"] == 4
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        assert store.cycle == 4
        log = store.visit_log()
    assert (log["cycle"] == 1).sum() == 21  # warm-up: the index and every page
    for cycle in (2, 3, 4):
        assert 1 <= (log["cycle"] == cycle).sum() <= 6  # the budget (no start request again)


def test_a_full_disk_is_said_once_and_the_crawl_exits_1_keeping_what_was_written(tmp_path):
    # SQLite's SQLITE_FULL mid-crawl (tests/full_disk_store.py): each visit it cannot write
    # is said as it happens, the buffer is kept and retried, what is still unwritten at the
    # end is said lost in one line, `scrapy crawl` exits 1, and the store is sound
    from .cli_project import make_project, scrapy

    project = make_project(tmp_path)
    store = tmp_path / "history.sqlite3"
    with LocalSite() as site:
        site.pages["/"] = index(40)
        for i in range(40):
            site.pages[f"/p{i}"] = page(i)
        out = scrapy(
            project, "crawl", "pages", "-a", f"start_url={site.url}/",
            "-s", f"RECRAWL_STORE={store}",
            "-s", "RECRAWL_STORE_CLASS=tests.full_disk_store.FullDiskStore",
        )  # fmt: skip
    assert out.returncode == 1, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "database or disk is full" in out.stderr
    lost = [line for line in out.stderr.splitlines() if "could not be written and are lost" in line]
    assert len(lost) == 1 and "visit(s) recorded by this crawl" in lost[0], out.stderr[-3000:]
    with SqliteHistoryStore(tmp_path / "history.sqlite3") as store:
        assert store.db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        kept = len(store.visit_log()["url_id"])
        assert 0 < kept < 41  # what the first flushes wrote is there; the rest is said lost
