"""A real continuous ``scrapy crawl`` with RedisRecrawlScheduler, whose redis-server
(no persistence: no AOF, no RDB) is restarted mid-crawl and comes back empty: the
crawl notices within one cycle, says so in one line naming the store, writes
nothing into the emptied Redis and exits non-zero (issue 16, item 3)."""

from __future__ import annotations

import datetime as dt
import json
import re
import time

import pytest

from example_project.site import RunningSite

from .redis_server import RedisServer
from .test_redis_crawl import start_crawl

pytestmark = pytest.mark.slow

CYCLE_SECONDS = 3


def _logged_at(line: str) -> float:
    stamp = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", line)
    assert stamp, line
    return dt.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S").timestamp()


def _crawl_three_cycles(site, server, client, tmp_path, **settings):
    """A continuous crawl on ``server``'s Redis, returned running once it is 3 cycles
    in (the Redis restart must lose a history); the test fails if it never gets there."""
    proc = start_crawl(
        site.base_url,
        server.url,
        tmp_path,
        "crawl",
        RECRAWL_CONTINUOUS=True,
        RECRAWL_WARMUP_CYCLES=1,
        RECRAWL_BUDGET=15,
        RECRAWL_CYCLE_SECONDS=CYCLE_SECONDS,
        RECRAWL_CYCLE_PERIOD=CYCLE_SECONDS,
        DOWNLOAD_DELAY=0.1,
        CONCURRENT_REQUESTS=2,
        RECRAWL_REDIS_OUTAGE_SECONDS=30,
        **settings,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if int(client.get("{site:history}:cycle") or 0) >= 3:
            break
        time.sleep(0.1)
    if proc.poll() is None and int(client.get("{site:history}:cycle") or 0) >= 3:
        return proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    pytest.fail((tmp_path / "crawl.log").read_text()[-3000:])


def test_redis_restarted_without_persistence_stops_the_crawl_within_a_cycle(tmp_path):
    with RedisServer() as server, RunningSite(pages=60, seed=4) as site:
        client = server.client()
        proc = _crawl_three_cycles(site, server, client, tmp_path)
        try:
            server.restart(down_seconds=0.5)  # SIGTERM: nothing on disk, back empty
            back = time.time()
            proc.wait(90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log = (tmp_path / "crawl.log").read_text()
        lost = [line for line in log.splitlines() if "vanished while" in line]
        history_keys = client.keys("site:history:*")
    stats = json.loads((tmp_path / "crawl.stats.json").read_text())
    assert proc.returncode != 0, log[-3000:]
    assert stats["finish_reason"] == "recrawl_store_lost"
    assert stats["recrawl/store_lost"] == 1
    # one line, naming the store and what to do
    assert len(lost) == 1, log[-3000:]
    assert "ERROR" in lost[0] and f"history store at {server.url}" in lost[0]
    assert "'site:history'" in lost[0] and "appendonly yes" in lost[0]
    assert "docs/distributed.md" in lost[0] and "RECRAWL_ON_STORE_LOSS" in lost[0]
    assert "Traceback" not in log
    # noticed within one cycle of Redis coming back (log times are whole seconds)
    assert _logged_at(lost[0]) <= back + CYCLE_SECONDS + 1, (lost[0], back)
    # and not one visit, counter or request written into the emptied Redis's history
    assert history_keys == []


def test_continue_goes_on_with_a_fresh_history_after_the_restart(tmp_path):
    with RedisServer() as server, RunningSite(pages=60, seed=4) as site:
        client = server.client()
        proc = _crawl_three_cycles(
            site,
            server,
            client,
            tmp_path,
            RECRAWL_MAX_CYCLES=7,
            RECRAWL_ON_STORE_LOSS="continue",
        )
        try:
            lost_epoch = client.hget("{site:history}:meta", "epoch")
            lost_cycle = int(client.get("{site:history}:cycle"))
            server.restart(down_seconds=0.5)
            proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log = (tmp_path / "crawl.log").read_text()
        meta = client.hgetall("{site:history}:meta")
        cycle = int(client.get("{site:history}:cycle") or 0)
    stats = json.loads((tmp_path / "crawl.stats.json").read_text())
    assert proc.returncode == 0, log[-3000:]
    assert stats["finish_reason"] == "finished"
    warned = [line for line in log.splitlines() if "going on with a fresh history" in line]
    assert len(warned) == 1 and "WARNING" in warned[0], log[-3000:]
    assert lost_epoch.decode() in warned[0]
    assert "vanished while" not in log and "Traceback" not in log
    # the fresh history: a new epoch, owned by the spider, its cycles counted on from
    # where they were (what it holds depends on what was in flight: the queues went too)
    assert meta[b"epoch"] != lost_epoch and meta[b"spider"] == b"site"
    assert cycle > lost_cycle
