"""``scrapy recrawl-reset`` against a running Redis crawl (issue 29): a real
``scrapy crawl`` with RedisRecrawlScheduler, or with the plain RecrawlScheduler on a
Redis history store, on a real redis-server. The reset is refused while the crawl
runs (the shared cycle's workers; the store's crawl lease, history/redis_liveness.py),
goes ahead at once after a clean end and, after a killed crawl, once
RECRAWL_REDIS_WORKER_TIMEOUT has passed; a reset that goes through anyway (the crawl
not seen yet) has the crawl stop without re-creating any key of the emptied store or
of its shared cycle (frontier/redis.py: the fence; history/epoch.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from example_project.site import RunningSite
from scrapy_recrawl.frontier.redis import reset_spider
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.history.redis_schema import LEASE as LEASE_NAME
from scrapy_recrawl.history.redis_schema import Layout

from .helpers import REPO
from .test_redis_crawl import PROJECT, start_crawl

pytestmark = pytest.mark.slow

#: the example project's spider, its history's key and its shared cycle's keys
SPIDER, STORE_KEY = "site", "site:history"


def reset(redis_url: str, *, shared: bool = True, **settings) -> subprocess.CompletedProcess:
    """``scrapy recrawl-reset site --yes`` in the example project, as a user types it:
    ``shared``, for RedisRecrawlScheduler (on ``REDIS_URL``); else for the plain
    scheduler on the Redis store ``RECRAWL_STORE``."""
    cmd = [sys.executable, "-m", "scrapy", "recrawl-reset", SPIDER, "--yes"]
    if shared:
        settings = {"SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler", **settings}
        settings["REDIS_URL"] = redis_url
    else:
        settings["RECRAWL_STORE"] = redis_url
    for k, v in settings.items():
        cmd += ["-s", f"{k}={v}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PROJECT)])}
    return subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120)


def frontier_keys(client) -> list[str]:
    """The spider's shared-cycle keys (state, workers, queues, dupefilters, claims)."""
    return sorted(k.decode() for k in client.keys(f"{SPIDER}:*"))


def test_reset_is_refused_while_a_redis_crawl_runs_and_a_reset_crawl_recreates_nothing(
    redis_db, tmp_path
):
    client = redis_db.client()
    with RunningSite(pages=400, seed=5) as site:
        # continuous and slow enough to be running through both resets; following links
        # keeps it pushing new URLs into the shared queue and dupefilter
        proc = start_crawl(
            site.base_url,
            redis_db.url,
            tmp_path,
            "crawl",
            RECRAWL_CONTINUOUS=True,
            RECRAWL_CYCLE_PERIOD=3,
            RECRAWL_CYCLE_SECONDS=3,
            DOWNLOAD_DELAY=0.05,
            CONCURRENT_REQUESTS=2,
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and proc.poll() is None:
                if client.hlen(f"{SPIDER}:recrawl:workers") and client.zcard(f"{SPIDER}:requests"):
                    break
                time.sleep(0.1)
            assert proc.poll() is None, (tmp_path / "crawl.log").read_text()[-3000:]
            with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
                known = len(store)
            assert known > 0

            # 1. refused: one line, exit 1, nothing deleted
            run = reset(redis_db.url)
            # (beside the store's own warning about this Redis's persistence)
            lines = [line for line in run.stderr.splitlines() if "recrawl-reset" in line]
            assert run.returncode == 1, (run.stdout, run.stderr)
            assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
            assert "is being crawled" in lines[0] and "nothing deleted" in lines[0]
            assert "RECRAWL_REDIS_WORKER_TIMEOUT=30 s" in lines[0]
            assert client.exists(f"{SPIDER}:recrawl:state")
            with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
                assert len(store) >= known

            # 2. a reset that goes through anyway (what the command does once it
            # goes ahead: the store emptied under a new epoch, the shared cycle deleted)
            with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
                store.clear()
            settings = {
                "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
                "REDIS_URL": redis_db.url,
            }
            from scrapy.settings import Settings

            reset_spider(Settings(settings), SPIDER)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    log = (tmp_path / "crawl.log").read_text()
    stats = json.loads((tmp_path / "crawl.stats.json").read_text())
    # the crawl noticed, said so once, and stopped with a non-zero status
    assert proc.returncode != 0, log[-3000:]
    assert stats["finish_reason"] == "recrawl_store_lost", log[-3000:]
    # ("was replaced", or "vanished" when its check fell between the reset's delete
    # and its new epoch)
    said = [line for line in log.splitlines() if "while this process used it" in line]
    assert len(said) == 1 and "ERROR" in said[0], log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    # nothing it did after the reset was applied: no key of the shared cycle came back
    # (no queue, dupefilter, workers hash, state), and the store is the reset one
    assert frontier_keys(client) == [], [(k, client.ttl(k)) for k in frontier_keys(client)]
    with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
        assert (len(store), store.cycle) == (0, 0)
    client.close()


#: the plain scheduler (the default) on a Redis history store, and that store's lease
PLAIN = {"SCHEDULER": "scrapy_recrawl.RecrawlScheduler"}
LEASE = Layout(STORE_KEY, 1).store(LEASE_NAME)


def said(run: subprocess.CompletedProcess) -> list[str]:
    """The reset's own lines on stderr (beside the store's warning about this Redis's
    persistence)."""
    return [line for line in run.stderr.splitlines() if "recrawl-reset" in line]


def test_reset_is_refused_during_a_plain_crawl_on_redis_and_goes_ahead_once_a_killed_one_timed_out(
    redis_db, tmp_path
):
    """A single-process crawl leaves its lease in the Redis: the reset is refused in one
    line naming the process, nothing deleted. Killed (SIGKILL: no clean close), the
    crawl holds the store until RECRAWL_REDIS_WORKER_TIMEOUT after its last stamp, and
    not longer: then the lease key is gone and the reset goes ahead."""
    timeout = 6  # short, still three checks of the crawl's (every 2 s) within it
    client = redis_db.client()
    with RunningSite(pages=400, seed=5) as site:
        proc = start_crawl(
            site.base_url,
            redis_db.url,
            tmp_path,
            "crawl",
            **PLAIN,
            RECRAWL_STORE=redis_db.url,
            RECRAWL_REDIS_WORKER_TIMEOUT=timeout,
            RECRAWL_CONTINUOUS=True,
            RECRAWL_CYCLE_PERIOD=3,
            RECRAWL_CYCLE_SECONDS=3,
            DOWNLOAD_DELAY=0.05,
            CONCURRENT_REQUESTS=2,
        )
        try:
            deadline = time.monotonic() + 90
            with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
                while time.monotonic() < deadline and proc.poll() is None:
                    if client.exists(LEASE) and len(store) > 0:
                        break
                    time.sleep(0.1)
                assert proc.poll() is None, (tmp_path / "crawl.log").read_text()[-3000:]
                known, epoch = len(store), store.epoch
            assert known > 0 and not client.keys(f"{SPIDER}:*")  # no shared cycle here

            # 1. refused: one line naming the process, exit 1, nothing deleted
            run = reset(redis_db.url, shared=False, RECRAWL_REDIS_WORKER_TIMEOUT=timeout)
            lines = said(run)
            assert run.returncode == 1, (run.stdout, run.stderr)
            assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
            assert "is being crawled" in lines[0] and "nothing deleted" in lines[0]
            assert f"history store at {redis_db.url}" in lines[0], lines[0]
            assert f":{proc.pid})" in lines[0], (proc.pid, lines[0])
            assert f"RECRAWL_REDIS_WORKER_TIMEOUT={timeout} s" in lines[0]
            with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
                assert len(store) >= known and store.epoch == epoch
        finally:
            proc.kill()  # SIGKILL: the lease is never left
            proc.wait()

        # 2. a killed crawl holds the store until the timeout after its last stamp...
        with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
            holders = store.holders(timeout)
            assert [h.split(":")[1] for h in holders] == [str(proc.pid)], holders
            last = max(status["seen"] for status in holders.values())
            seconds, micros = client.time()  # the Redis's clock, which stamped it
            left = last + timeout - (seconds + micros / 1e6)
            assert 0 < left <= timeout
            time.sleep(left + 0.05)  # ... and not longer
            assert store.holders(timeout) == {} and not client.exists(LEASE)
        run = reset(redis_db.url, shared=False, RECRAWL_REDIS_WORKER_TIMEOUT=timeout)
        assert run.returncode == 0, (run.stdout, run.stderr)
        assert said(run) == [] and "Reset:" in run.stdout, (run.stdout, run.stderr)
        with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
            assert (len(store), store.cycle) == (0, 0)
    client.close()


def test_reset_goes_ahead_at_once_after_a_plain_crawl_on_redis_ended_cleanly(redis_db, tmp_path):
    """A crawl that ends leaves its lease at the close: the next reset, judging by the
    default 30 s, goes ahead without waiting."""
    client = redis_db.client()
    with RunningSite(pages=40, seed=5) as site:
        proc = start_crawl(
            site.base_url, redis_db.url, tmp_path, "crawl", **PLAIN, RECRAWL_STORE=redis_db.url
        )
        proc.wait(120)
    log = (tmp_path / "crawl.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
        assert len(store) > 0
        assert store.holders(30) == {} and not client.exists(LEASE)
    run = reset(redis_db.url, shared=False)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert said(run) == [] and "Reset:" in run.stdout, (run.stdout, run.stderr)
    with RedisHistoryStore(redis_db.url, key=STORE_KEY) as store:
        assert (len(store), store.cycle) == (0, 0)
    client.close()
