"""Clocks across machines (issue 29): a Redis worker whose own clock is off judges the
others alive by the Redis's clock (TIME), never by its own; real processes, one with a
skewed wall clock (tests/fixtures/skewed_clock), real redis-server, real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from example_project.site import RunningSite
from scrapy_recrawl.frontier.redis import RedisFrontier

from .helpers import REPO

PROJECT = REPO / "example_project"
SKEWED = Path(__file__).parent / "fixtures" / "skewed_clock"


def test_liveness_is_judged_by_the_redis_clock(redis_db, monkeypatch):
    """Seen and now both by the Redis's TIME: a reader whose clock is 240 s ahead (or a
    day behind) sees a worker that just wrote its status as alive, and one whose status
    is older than the timeout by the server's clock as gone."""
    client = redis_db.client()
    try:
        a = RedisFrontier(client, "s:recrawl", "a", lock_seconds=5)
        b = RedisFrontier(client, "s:recrawl", "b", lock_seconds=5)
        a.take_epoch("e1")  # as a crawl does at open: its writes are fenced by it
        seen = a.write_status(3, True)
        assert abs(seen - a.now()) < 5  # the server's time, not this process's
        real = time.time
        for skew in (240.0, -86400.0):
            monkeypatch.setattr(time, "time", lambda skew=skew: real() + skew)
            assert set(b.workers(timeout=30)) == {"a"}
            assert b.workers(timeout=30)["a"] == {"cycle": 3, "busy": True, "seen": seen}
        monkeypatch.setattr(time, "time", real)
        # a status last written 60 s ago by the server's clock: gone after 30 s
        old = json.dumps({"cycle": 3, "busy": True, "seen": a.now() - 60})
        client.hset("s:recrawl:workers", "a", old)
        assert b.workers(timeout=30) == {}
        assert set(b.workers(timeout=90)) == {"a"}
    finally:
        client.close()


def _crawl(site_url: str, redis_url: str, out: Path, name: str, skew: float = 0.0):
    options = {
        "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
        "REDIS_URL": redis_url,
        "LOG_LEVEL": "INFO",
        "STATS_DUMP_FILE": str(out / f"{name}.stats.json"),
        "EXTENSIONS": json.dumps({"example_project.stats_dump.StatsDump": 0}),
        "RETRY_ENABLED": False,
        "CONCURRENT_REQUESTS": 2,
        "DOWNLOAD_DELAY": 0.1,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={site_url}/"]
    for k, v in options.items():
        cmd += ["-s", f"{k}={v}"]
    path = [str(SKEWED)] if skew else []
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*path, str(REPO), str(PROJECT)]),
        "RECRAWL_TEST_CLOCK_SKEW": str(skew),
    }
    log = open(out / f"{name}.log", "w")  # noqa: SIM115 -- closed with the process
    return subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_a_worker_240s_ahead_joins_the_running_cycle_and_fetches_nothing_twice(redis_db, tmp_path):
    """Before: the skewed worker saw the running one last seen 240 s ago, declared its
    cycle abandoned and opened the next one (19 of 101 pages fetched twice)."""
    with RunningSite(pages=100, seed=11) as site:
        first = _crawl(site.base_url, redis_db.url, tmp_path, "first")
        deadline = time.monotonic() + 120
        while len(site.state.served()["served"]) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
        ahead = _crawl(site.base_url, redis_db.url, tmp_path, "ahead", skew=240.0)
        stats = []
        for proc, name in ((first, "first"), (ahead, "ahead")):
            proc.wait(240)
            log = (tmp_path / f"{name}.log").read_text()
            assert proc.returncode == 0, log[-3000:]
            stats.append(json.loads((tmp_path / f"{name}.stats.json").read_text()))
        assert "abandoned" not in (tmp_path / "ahead.log").read_text()
        # the skewed worker joined cycle 1; nobody opened a second one
        assert sum(s.get("recrawl/cycles_opened", 0) for s in stats) == 1
        assert [s["recrawl/cycle"] for s in stats] == [1, 1]
        assert stats[1].get("recrawl/joined_cycle") == 1
        pages = Counter(e["path"] for e in site.state.served()["served"])
        pairs = sum(s.get("recrawl/boilerplate/pair_fetches", 0) for s in stats)
        again = sum(n - 1 for n in pages.values())
        assert again <= pairs, (again, pairs, pages.most_common(5))
        assert len(pages) >= 100
