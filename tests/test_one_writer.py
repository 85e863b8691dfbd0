"""Two ``scrapy crawl`` processes on one SQLite store: the second stops at start-up,
naming the store and the first; a SIGKILLed crawl leaves no stale lock (issue 16)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from .cli_project import make_project, scrapy
from .helpers import REPO, LocalSite, Page

pytestmark = pytest.mark.slow

PAGES = 20


@pytest.fixture
def site():
    with LocalSite() as site:
        links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(PAGES))
        site.pages["/"] = Page(f"<html><body>{links}</body></html>".encode())
        for i in range(PAGES):
            site.pages[f"/p{i}"] = Page(f"<html><body><p>page {i}</p></body></html>".encode())
        yield site


def hold_after(site: LocalSite, served: int):
    """Requests to ``site`` past the first ``served`` wait until the function returned is
    called: the crawl is still running, holding its store, for as long as the test needs
    (a crawl slowed by a delay was not: on a loaded machine the second crawl's start-up
    outlasted the first crawl's 21 pages). ``release(serve=False)``: the requests held
    are dropped unanswered and unlogged (their crawl was killed); later ones are served."""
    go, answer = threading.Event(), [True]
    handler = site.server.RequestHandlerClass
    do_get = handler.do_GET

    def held(self) -> None:
        if not go.is_set() and len(site.log) >= served:
            go.wait(120)  # a bound, should the test never release it
            if not answer[0]:
                self.close_connection = True
                return
        do_get(self)

    def release(serve: bool = True) -> None:
        answer[0] = serve
        go.set()

    handler.do_GET = held
    return release


def start_crawl(project: Path, url: str, *settings: str) -> subprocess.Popen:
    """``scrapy crawl pages`` in the background, one request at a time (with
    :func:`hold_after`, it stops where the test wants it)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
    args = [sys.executable, "-m", "scrapy", "crawl", "pages", "-a", f"start_url={url}/"]
    for s in ("DOWNLOAD_DELAY=0.25", "CONCURRENT_REQUESTS=1", *settings):
        args += ["-s", s]
    return subprocess.Popen(
        args, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_holding(lock: Path, proc: subprocess.Popen, site: LocalSite, pages: int = 3) -> None:
    """Until ``proc`` holds the store's lock and has fetched a few pages."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        if lock.exists() and lock.read_text().startswith(f"{proc.pid}\t"):
            if len(site.log) >= pages:
                return
        time.sleep(0.05)
    raise AssertionError("the crawl never started")


#: the lock is under test here: no boilerplate pair (a deliberate second fetch of a page,
#: docs/detection.md) to tell apart from the visits the counts below compare
_SETTINGS = 'RECRAWL_STORE = "history.sqlite3"\nRECRAWL_LEARN_BOILERPLATE = False\n'


def visits_per_url(store: Path, cycle: int | None = None) -> Counter:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    sql = "SELECT u.url FROM visits v JOIN urls u ON u.id = v.url_id"
    rows = db.execute(sql + (" WHERE v.cycle = ?" if cycle else ""), (cycle,) if cycle else ())
    counts = Counter(url for (url,) in rows)
    db.close()
    return counts


def served(site: LocalSite, log: list[dict] | None = None) -> Counter:
    return Counter(site.url + r["path"] for r in (site.log if log is None else log))


def test_a_second_crawl_on_the_same_store_stops_at_start_up(tmp_path, site):
    project = make_project(tmp_path, _SETTINGS)
    store, lock = project / "history.sqlite3", project / "history.sqlite3.lock"
    release = hold_after(site, 3)
    first = start_crawl(project, site.url)
    try:
        wait_holding(lock, first, site)
        fetched = len(site.log)
        second = scrapy(project, "crawl", "pages", "-a", f"start_url={site.url}/")
        assert first.poll() is None  # the first was running all along
    finally:
        release()
        out, err = first.communicate(timeout=120)
    assert second.returncode == 1
    assert "Traceback" not in second.stderr
    said = [line for line in second.lines if "in use by another process" in line]
    assert len(said) == 1, second.stderr
    assert f"sqlite:///{store}" in said[0]
    assert f" -m scrapy crawl pages -a start_url={site.url}/ -s" in said[0]
    assert f"(pid {first.pid}: python" in said[0]
    assert len(site.log) >= fetched  # (the second fetched nothing: see the counts below)

    assert first.returncode == 0, err[-3000:]
    # the first's history is whole: one visit recorded per page served, nothing else
    assert visits_per_url(store) == served(site)
    assert sum(served(site).values()) == PAGES + 1
    db = sqlite3.connect(store)
    assert db.execute("SELECT value FROM meta WHERE key = 'cycle'").fetchone() == ("1",)
    db.close()


def test_a_sigkilled_crawl_leaves_no_stale_lock(tmp_path, site):
    project = make_project(tmp_path, _SETTINGS)
    store, lock = project / "history.sqlite3", project / "history.sqlite3.lock"
    release = hold_after(site, 6)
    first = start_crawl(project, site.url, "RECRAWL_FLUSH_EVERY=2")
    wait_holding(lock, first, site, pages=6)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    release(serve=False)  # the killed crawl's last request: never answered
    killed_at = len(site.log)
    assert lock.read_text().startswith(f"{first.pid}\t")  # its note is there, its lock not

    run = scrapy(project, "crawl", "pages", "-a", f"start_url={site.url}/", "-s", "LOG_LEVEL=INFO")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "in use by another process" not in run.stderr and "Traceback" not in run.stderr
    assert "recrawl cycle 2" in run.stderr  # the killed crawl's cycle 1 is kept

    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    # the restart's visits are all there; of the killed crawl's, none more than was served
    assert visits_per_url(store, cycle=2) == served(site, site.log[killed_at:])
    before_kill = visits_per_url(store, cycle=1)
    assert before_kill and all(
        n <= served(site, site.log[:killed_at])[u] for u, n in before_kill.items()
    )
    assert lock.read_text() == ""  # released by the clean end of the restart
