"""URL traps (issue 29, traps.py): a local site that makes links for ever, crawled for
real; the known URLs per host and the saved frontier stay under their caps, each cap
hit counted and said once; a share budget capped by RECRAWL_BUDGET_MAX."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scrapy_recrawl.core.budget import Share, budget_pages, cycle_budget
from scrapy_recrawl.core.cycle import CycleConfig
from scrapy_recrawl.history import SqliteHistoryStore
from scrapy_recrawl.settings import RecrawlSettingError

from .cli_project import make_project, scrapy

FANOUT = 5


class TrapHandler(BaseHTTPRequestHandler):
    """/p/N links to /p/N*FANOUT+1 .. /p/N*FANOUT+FANOUT: a tree with no end."""

    served: list[str]

    def do_GET(self) -> None:  # noqa: N802 -- http.server's name
        self.served.append(self.path)
        match = re.fullmatch(r"/p/(\d+)", self.path)
        n = int(match.group(1)) if match else 0
        links = "".join(f'<a href="/p/{n * FANOUT + i}">{i}</a>' for i in range(1, FANOUT + 1))
        body = f"<html><body><h1>page {n}</h1>{links}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def trap():
    handler = type("Trap", (TrapHandler,), {"served": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.served
    finally:
        server.shutdown()
        server.server_close()


def _stat(stderr: str, name: str) -> int:
    match = re.search(rf"'{re.escape(name)}': (\d+)", stderr)
    return int(match.group(1)) if match else 0


@pytest.mark.slow
def test_a_url_trap_is_capped_per_host(trap, tmp_path):
    base, served = trap
    project = make_project(
        tmp_path,
        'RECRAWL_STORE = "history.sqlite3"\n'
        "RECRAWL_MAX_URLS_PER_HOST = 40\n"
        "CLOSESPIDER_TIMEOUT = 120\n"  # a safety net only: the cap ends the crawl
        'LOG_LEVEL = "INFO"\n',
    )
    run = scrapy(project, "crawl", "pages", "-a", f"start_url={base}/p/0")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'finish_reason': 'finished'" in run.stderr  # not the timeout
    # 40 pages at most; a second fetch only for a boilerplate pair (docs/detection.md)
    assert len(set(served)) <= 40
    assert len(served) - len(set(served)) <= _stat(run.stderr, "recrawl/boilerplate/pair_fetches")
    warned = [line for line in run.lines if "RECRAWL_MAX_URLS_PER_HOST = 40" in line]
    assert len(warned) == 1 and "127.0.0.1" in warned[0], warned
    assert _stat(run.stderr, "recrawl/host_cap_dropped") > 0
    with SqliteHistoryStore(project / "history.sqlite3", read_only=True) as store:
        assert len(store.arrays().ids) <= 40
    # the next crawl counts the store's URLs: nothing new admitted past the cap
    served.clear()
    run = scrapy(project, "crawl", "pages", "-a", f"start_url={base}/p/0")
    assert run.returncode == 0, run.stderr[-3000:]
    with SqliteHistoryStore(project / "history.sqlite3", read_only=True) as store:
        assert len(store.arrays().ids) <= 40


@pytest.mark.slow
def test_the_saved_frontier_is_capped(trap, tmp_path):
    base, served = trap
    project = make_project(
        tmp_path,
        'RECRAWL_STORE = "history.sqlite3"\n'
        "RECRAWL_WARMUP_CYCLES = 0\n"
        "RECRAWL_BUDGET = 10\n"
        "RECRAWL_FRONTIER_MAX = 15\n"
        "CLOSESPIDER_TIMEOUT = 120\n"
        'LOG_LEVEL = "INFO"\n',
    )
    run = scrapy(project, "crawl", "pages", "-a", f"start_url={base}/p/0")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'finish_reason': 'finished'" in run.stderr
    warned = [line for line in run.lines if "RECRAWL_FRONTIER_MAX = 15" in line]
    assert len(warned) == 1, run.stderr[-3000:]
    assert _stat(run.stderr, "recrawl/frontier_cap_dropped") > 0
    with SqliteHistoryStore(project / "history.sqlite3", read_only=True) as store:
        assert store.frontier_size() == 15


def test_a_share_budget_is_capped_by_budget_max():
    assert budget_pages("5%", 28_273) == 1414  # the trap
    assert budget_pages("5%", 28_273, maximum=200) == 200
    assert budget_pages("5%", 1000, maximum=200) == 50  # under the cap: the share
    assert budget_pages(500, 28_273, maximum=200) == 500  # a page count is the user's own
    assert cycle_budget(Share(0.05), 0.2, 28_273, warmup=False, maximum=200).total == 200
    config = CycleConfig.from_settings({"RECRAWL_BUDGET_MAX": "200"})
    assert config.budget_max == 200
    with pytest.raises(RecrawlSettingError, match="RECRAWL_BUDGET_MAX"):
        CycleConfig.from_settings({"RECRAWL_BUDGET_MAX": -1})


def test_a_bad_cap_is_refused_naming_the_setting():
    from scrapy.settings import Settings

    from scrapy_recrawl.traps import TrapCaps

    for name in ("RECRAWL_MAX_URLS_PER_HOST", "RECRAWL_FRONTIER_MAX"):
        with pytest.raises(RecrawlSettingError, match=name):
            TrapCaps(Settings({name: "-5"}))
