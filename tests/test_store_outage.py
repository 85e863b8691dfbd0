"""Redis stopped for 10 seconds mid-crawl, then started again on the same port with
its data (AOF): the responses that arrived meanwhile are recorded once it is back, or,
past the hold's bound (``RECRAWL_FLUSH_EVERY``), counted in one line and ``scrapy
crawl`` exits 1 (issue 29, "Outages"; the hold itself: tests/test_held_visits.py).

A real ``scrapy crawl`` with the Redis scheduler, a real redis-server, a real local
site. Four pages of the site answer only when the test says (``LocalSite.gates``):
the test waits until every other page is in the store, stops Redis, lets the four
answer (so exactly they arrive while Redis is away), keeps Redis away for a few
seconds and starts it again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from scrapy_recrawl.history.redis import RedisHistoryStore

from .cli_project import make_project
from .helpers import REPO, LocalSite, Page
from .redis_server import RedisServer

pytestmark = pytest.mark.slow

PAGES = 20  # answered at once
GATED = 4  # answered while Redis is away
DOWN_SECONDS = 10.0  # the outage: "Redis down 10 s mid-crawl"
KEY = "pages:history"


def _page(name: str) -> Page:
    text = f"Page {name} says something about {name} in enough words to sign it well."
    return Page(f"<html><body><p>{text}</p></body></html>".encode())


def _site(site: LocalSite) -> list[str]:
    names = [f"p{i}" for i in range(PAGES)] + [f"g{i}" for i in range(GATED)]
    links = "".join(f'<a href="/{n}">{n}</a>' for n in names)
    site.pages["/"] = Page(f"<html><body><h1>Index</h1>{links}</body></html>".encode())
    for name in names:
        site.pages[f"/{name}"] = _page(name)
    for i in range(GATED):
        site.gates[f"/g{i}"] = threading.Event()
    return ["/", *(f"/{n}" for n in names)]


def _visited(server: RedisServer) -> list[str]:
    """The path of each visit in the store's log (read by another client)."""
    with RedisHistoryStore(server.url, key=KEY) as store:
        log = store.visit_log()
        ids = log["url_id"]
        urls = dict(
            zip(sorted(set(ids.tolist())), store.urls(sorted(set(ids.tolist()))), strict=True)
        )
    return ["/" + urls[int(i)].split("/", 3)[3] for i in ids]


def _crawl(project: Path, site: LocalSite, server: RedisServer, tmp_path: Path, **settings):
    options = {
        "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
        "REDIS_URL": server.url,
        "LOG_LEVEL": "INFO",
        "CONCURRENT_REQUESTS": 8,
        "RECRAWL_FLUSH_SECONDS": 1,  # the idle tick every 0.5 s: the test sees the store
        "RECRAWL_REDIS_OUTAGE_SECONDS": 60,
        "RECRAWL_LEARN_BOILERPLATE": False,  # no boilerplate pair: one fetch per page
        "STATS_DUMP_FILE": str(tmp_path / "stats.json"),
        "EXTENSIONS": json.dumps({"example_project.stats_dump.StatsDump": 0}),
        **settings,
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "pages", "-a", f"start_url={site.url}/"]
    for k, v in options.items():
        cmd += ["-s", f"{k}={v}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
    log = open(tmp_path / "crawl.log", "w")  # noqa: SIM115 -- closed with the process
    return subprocess.Popen(cmd, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)


def _outage(tmp_path: Path, server: RedisServer, **settings) -> tuple[int, str, dict, list[str]]:
    """Crawl, take Redis away while the gated pages answer, bring it back; the exit
    status, the log, the stats, every page served and the visits in the store."""
    project = make_project(tmp_path / "project")
    with LocalSite() as site:
        paths = _site(site)
        proc = _crawl(project, site, server, tmp_path, **settings)
        try:
            # every page but the gated ones fetched and in the store (the idle tick),
            # the gated ones asked for and waiting
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and proc.poll() is None:
                asked = {r["path"] for r in site.log}
                if all(f"/g{i}" in asked for i in range(GATED)):
                    if len(_visited(server)) == 1 + PAGES:
                        break
                time.sleep(0.1)
            assert proc.poll() is None, (tmp_path / "crawl.log").read_text()[-3000:]
            assert len(_visited(server)) == 1 + PAGES
            server.stop()  # SIGTERM: AOF fsync'd on every write, the data kept
            for gate in site.gates.values():
                gate.set()  # the four answer while Redis is away
            time.sleep(DOWN_SECONDS)
            server.start()  # the same port, the same data
            proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        served = sorted(r["path"] for r in site.log)
    assert served == sorted(paths)  # each page fetched once
    log = (tmp_path / "crawl.log").read_text()
    stats = json.loads((tmp_path / "stats.json").read_text())
    return proc.returncode, log, stats, _visited(server)


def test_responses_that_arrive_while_redis_is_away_are_recorded_when_it_is_back(
    redis_aof, tmp_path
):
    code, log, stats, visited = _outage(tmp_path, redis_aof)
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    # every fetched page has its visit, once
    assert sorted(visited) == sorted(
        ["/", *(f"/p{i}" for i in range(PAGES))] + [f"/g{i}" for i in range(GATED)]
    )
    assert len(visited) == stats["response_received_count"]
    assert stats["recrawl/visits_held"] >= GATED
    assert stats["recrawl/visits_recorded_late"] == stats["recrawl/visits_held"]
    assert "recrawl/visits_lost" not in stats
    assert "did not answer" in log and "answers again" in log
    assert "are lost" not in log and "visit(s)" not in log


def test_past_the_bound_the_lost_are_counted_in_one_line_and_the_crawl_exits_1(redis_aof, tmp_path):
    # a hold of 2 (RECRAWL_FLUSH_EVERY): of the four that arrive while Redis is away,
    # two are recorded when it is back and two are lost
    code, log, stats, visited = _outage(tmp_path, redis_aof, RECRAWL_FLUSH_EVERY=2)
    assert code == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    lost = [line for line in log.splitlines() if "are lost" in line]
    assert len(lost) == 1, lost
    assert "recrawl: 2 visit(s)" in lost[0], lost
    assert stats["recrawl/visits_lost"] == 2
    assert len(visited) == 1 + PAGES + GATED - 2
    assert len(visited) == stats["response_received_count"] - 2
