"""Real ``scrapy crawl`` processes sharing one redis-server (or one Redis Cluster):
several processes per cycle, the shared budget, the cycle opened once, Redis
restarted mid-crawl, Redis missing at start-up."""

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
from scrapy_recrawl.history.redis import RedisHistoryStore

from .helpers import REPO
from .redis_server import RedisServer, free_port

pytestmark = pytest.mark.slow

PROJECT = REPO / "example_project"


def start_crawl(
    site_url: str, redis_url: str, out: Path, name: str, **settings
) -> subprocess.Popen:
    """`scrapy crawl site` in the example project, RedisRecrawlScheduler, stats to a file."""
    options = {
        "SCHEDULER": "scrapy_recrawl.RedisRecrawlScheduler",
        "REDIS_URL": redis_url,
        "LOG_LEVEL": "INFO",
        "STATS_DUMP_FILE": str(out / f"{name}.stats.json"),
        "EXTENSIONS": json.dumps({"example_project.stats_dump.StatsDump": 0}),
        "RECRAWL_SCORER": "gp4c",
        # a retry is a deliberate second fetch: off, so every fetch is the scheduler's
        "RETRY_ENABLED": False,
        **settings,
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={site_url}/"]
    for k, v in options.items():
        cmd += ["-s", f"{k}={v}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PROJECT)])}
    log = open(out / f"{name}.log", "w")  # noqa: SIM115 -- closed with the process
    return subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)


def finish(
    procs: list[subprocess.Popen], out: Path, names: list[str], timeout: float = 240
) -> list[dict]:
    stats = []
    for proc, name in zip(procs, names, strict=True):
        proc.wait(timeout)
        log = (out / f"{name}.log").read_text()
        assert proc.returncode == 0, log[-3000:]
        stats.append(json.loads((out / f"{name}.stats.json").read_text()))
    return stats


#: the site of the three-process test
PAGES = 1000


@pytest.fixture
def redis_server():
    with RedisServer(appendonly=True) as server:
        yield server


def test_three_processes_three_cycles_share_one_frontier(redis_deployment, tmp_path):  # noqa: F811
    redis = redis_deployment  # one redis-server, or a three-master cluster
    budget = 150
    # 1,000 pages: the warm-up's work for three processes (each must get some); the
    # budgeted cycles share 150 whatever the site's size
    with RunningSite(pages=PAGES, seed=3) as site:
        served_at = 0
        for cycle in (1, 2, 3):
            names = [f"c{cycle}p{i}" for i in range(3)]
            procs = [
                start_crawl(
                    site.base_url,
                    redis.url,
                    tmp_path,
                    name,
                    RECRAWL_WARMUP_CYCLES=1,
                    RECRAWL_BUDGET=budget,
                    RECRAWL_NEW_SHARE=0.2,
                    **redis.settings("site"),
                )
                for name in names
            ]
            stats = finish(procs, tmp_path, names)
            served = site.state.served(served_at)
            served_at = served["next"]
            pages = Counter(e["path"] for e in served["served"])
            # no URL handed out twice within a cycle, across the three processes; the only
            # second fetches are boilerplate pairs (docs/detection.md), counted apart
            pairs = sum(s.get("recrawl/boilerplate/pair_fetches", 0) for s in stats)
            again = sum(n - 1 for n in pages.values())
            assert pages and max(pages.values()) <= 2, pages.most_common(3)
            assert again <= pairs, (again, pairs, pages.most_common(3))
            assert sum(s.get("recrawl/cycles_opened", 0) for s in stats) == 1  # opened once
            assert {s["recrawl/cycle"] for s in stats} == {cycle}  # the others joined it
            if cycle == 1:  # the warm-up's 1,000 pages: work for all three, however late
                # one starts; a budgeted cycle's 150 may be done before a process on a
                # loaded machine has started (it joined the cycle: asserted above)
                assert all(s.get("response_received_count", 0) > 0 for s in stats), stats
            with redis.store("site:history") as store:
                log = store.visit_log()
                in_cycle = log["cycle"] == cycle
                # exactly one visit-log record per response received, by any process (a
                # pair's second fetch is a response, not a visit); a process that joined a
                # budgeted cycle its peers had spent has no such stat (Scrapy counts from 1)
                received = sum(s.get("response_received_count", 0) for s in stats)
                assert in_cycle.sum() == received - pairs
                ids = Counter(log["url_id"][in_cycle].tolist())
                assert max(ids.values()) == 1
                if cycle == 1:
                    assert len(store) >= PAGES  # warm-up: every page (and the index pages)
                else:
                    client = redis.client()
                    taken = client.hgetall(redis.frontier_key("site", "taken"))
                    client.close()
                    assert int(taken[b"total"]) <= budget  # the shared budget
                    redirects = sum(1 for e in served["served"] if e["status"] == 301)
                    # outside the budget: the start URL (each process's), redirects, pairs
                    starts = sum(s.get("recrawl/last_cycle/start", 0) for s in stats)
                    assert len(served["served"]) <= budget + redirects + pairs + starts
                    assert sum(pages.values()) >= budget // 2
            site.state.advance(1)
        with redis.store("site:history") as store:
            assert store.cycle == 3  # advanced exactly three times
            arr = store.arrays()
            log = store.visit_log()
            observed = Counter(log["url_id"][log["changed"] >= 0].tolist())
            for uid, n in zip(arr.ids.tolist(), arr.columns["n"].tolist(), strict=True):
                assert n == observed.get(uid, 0)


def crawl_until_served(site, redis_url: str, tmp_path, **settings):
    """A crawl of ``site`` (600 pages, spider "crawl") started and waited on until the site
    served 100 pages, still running: the moment the restart tests take Redis away."""
    proc = start_crawl(
        site.base_url,
        redis_url,
        tmp_path,
        "crawl",
        CONCURRENT_REQUESTS=4,
        DOWNLOAD_DELAY=0.01,
        RECRAWL_REDIS_OUTAGE_SECONDS=60,
        **settings,
    )
    deadline = time.monotonic() + 60
    while len(site.state.served()["served"]) < 100 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the crawl ended before Redis was restarted"
    return proc


def test_redis_restarted_mid_crawl_recovers_and_store_stays_consistent(redis_server, tmp_path):
    with RunningSite(pages=600, seed=5) as site:
        proc = crawl_until_served(site, redis_server.url, tmp_path)
        redis_server.restart(down_seconds=2.0)  # SIGTERM, 2 s away, same port and data
        stats = finish([proc], tmp_path, ["crawl"])[0]
        log = (tmp_path / "crawl.log").read_text()
    # it noticed, said which Redis, and carried on to the end of the cycle
    assert f"the Redis at redis://127.0.0.1:{redis_server.port}/0 is unreachable" in log
    assert "is back after" in log
    assert stats["finish_reason"] == "finished"
    assert stats["recrawl/redis_outages"] >= 1
    with RedisHistoryStore(redis_server.url, key="site:history") as store:
        arr = store.arrays()
        visits = store.visit_log()
        assert store.cycle == 1
        assert len(store) > 300  # most of the site, before and after the restart
        per_url = Counter(visits["url_id"].tolist())
        observed = Counter(visits["url_id"][visits["changed"] >= 0].tolist())
        rows, _ = store.rows()
        # no per-URL counter ahead of (or behind) the visit log
        # (rows() is by id; arrays() holds the URLs there are, ids ascending: a sharded
        # store's ids are not 1..N)
        for i, uid in enumerate(arr.ids.tolist()):
            assert int(rows["visits"][uid - 1]) == per_url[uid]
            assert int(arr.columns["n"][i]) == observed.get(uid, 0)


def test_redis_unreachable_at_start_up_names_the_url(tmp_path):
    port = free_port()
    with RunningSite(pages=10, seed=1) as site:
        proc = start_crawl(site.base_url, f"redis://127.0.0.1:{port}/0", tmp_path, "dead")
        proc.wait(120)
        log = (tmp_path / "dead.log").read_text()
        assert proc.returncode != 0
        assert site.state.served()["served"] == []  # nothing was fetched
    assert f"redis://127.0.0.1:{port}/0" in log
    assert "cannot reach" in log
