"""Scrapy's own crawl, engine and scheduler tests with RedisRecrawlScheduler as
``SCHEDULER`` and a local redis-server.

Scrapy's test tree comes from its sdist, found or fetched by
``tests/scrapy_suite/run.py`` (skipped with its message when it cannot be had).
The pytest plugin below (written to a temporary directory, so this suite never
imports it) sets ``SCHEDULER`` and ``REDIS_URL`` in Scrapy's default settings,
swaps the ``Scheduler`` name in test modules that build Scrapy's scheduler
themselves, and gives every crawler its own key prefix in Redis (crawlers that
share a ``JOBDIR`` share one, as a paused and resumed job does).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from .redis_server import RedisServer
from .scrapy_suite.run import locate_scrapy_tests

pytestmark = pytest.mark.slow

#: Scrapy's full-crawl tests, the scheduler contract and the dupefilter. Left out
#: (docs/distributed.md says why): test_engine_loop.py's TestRequestSendOrder (new URLs
#: wait in the shared Redis queue, continuations in this process's own, so Scrapy's
#: interleaving of start requests and callback requests by priority across one queue
#: does not hold), test_scheduler.py's DownloaderAware test_logic and TestMigration
#: (Scrapy's queue internals), test_engine.py (one start()-exception test).
MODULES = [
    "tests/test_crawl.py",
    "tests/test_scheduler_base.py",
    "tests/test_dupefilters.py",
]

PLUGIN = textwrap.dedent(
    """
    import hashlib
    import os

    import pytest
    import redis
    import scrapy.core.scheduler
    import scrapy.settings.default_settings as default_settings

    import scrapy_recrawl.stores as stores
    import scrapy_recrawl.frontier.distributed as distributed
    from scrapy_recrawl.frontier.redis import SpiderKeys
    from scrapy_recrawl.redis_scheduler import RedisRecrawlScheduler

    URL = os.environ["RECRAWL_SUITE_REDIS_URL"]
    default_settings.SCHEDULER = "scrapy_recrawl.RedisRecrawlScheduler"
    default_settings.REDIS_URL = URL


    def token(settings):
        jobdir = settings.get("JOBDIR")
        if jobdir:
            return "j" + hashlib.sha1(os.path.abspath(str(jobdir)).encode()).hexdigest()[:12]
        return f"s{id(settings)}"


    class Override:
        def __init__(self, settings):
            self.settings = settings

        def get(self, name, default=None):
            if name == "RECRAWL_REDIS_KEY":
                return f"{token(self.settings)}:recrawl"
            return self.settings.get(name, default)

        def getdict(self, name):
            return self.settings.getdict(name)


    _open_store = stores.open_store


    def open_store(settings, spider=None):
        if settings.get("RECRAWL_STORE") is not None:
            return _open_store(settings, spider)
        return _open_store(Override(settings), spider)


    stores.open_store = open_store
    _spider_keys = distributed.spider_keys


    def spider_keys(settings, spider, cluster):
        keys = _spider_keys(settings, spider, cluster)
        t = token(settings)
        return SpiderKeys(f"{t}:{keys.scheduler}", f"{t}:{keys.queue}", f"{t}:{keys.dupefilter}")


    distributed.spider_keys = spider_keys
    _open = RedisRecrawlScheduler.open


    def counted_open(self, spider):
        with open(os.environ["RECRAWL_SUITE_REPORT"], "a") as fh:
            fh.write(f"{spider.name}\\n")
        return _open(self, spider)


    RedisRecrawlScheduler.open = counted_open


    @pytest.fixture(autouse=True)
    def _redis_recrawl_scheduler(request, monkeypatch):
        client = redis.Redis.from_url(URL)
        client.flushall()
        client.close()
        module = getattr(request, "module", None)
        if getattr(module, "Scheduler", None) is scrapy.core.scheduler.Scheduler:
            monkeypatch.setattr(module, "Scheduler", RedisRecrawlScheduler)
        yield


    def pytest_report_header(config):
        return [f"scrapy-recrawl: SCHEDULER = RedisRecrawlScheduler, Redis at {URL}"]
    """
)


#: the outer pytest's settings, not the inner suite's: its options, its path, and an
#: xdist worker's identity (Scrapy's suite run from a worker would act as one)
_OUTER = ("PYTEST_ADDOPTS", "PYTHONPATH", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
          "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")  # fmt: skip


def test_scrapy_crawl_tests_pass_with_redis_recrawl_scheduler(tmp_path):
    tests_dir, how = locate_scrapy_tests()
    if tests_dir is None:
        pytest.skip(how)
    (tmp_path / "redis_recrawl_scrapy_plugin.py").write_text(PLUGIN)
    with RedisServer() as server:
        env = {k: v for k, v in os.environ.items() if k not in _OUTER}
        env["PYTHONPATH"] = str(tmp_path)
        env["RECRAWL_SUITE_REDIS_URL"] = server.url
        env["RECRAWL_SUITE_REPORT"] = str(tmp_path / "opened.txt")
        cmd = [sys.executable, "-m", "pytest", "-p", "redis_recrawl_scrapy_plugin"]
        cmd += ["-p", "no:cacheprovider", "--timeout=300", "-q", "-rfEs", *MODULES]
        out = subprocess.run(cmd, cwd=tests_dir, env=env, capture_output=True, text=True)
    tail = out.stdout[-6000:]
    assert out.returncode == 0, tail + out.stderr[-2000:]
    opened = (tmp_path / "opened.txt").read_text().splitlines()
    assert len(opened) >= 50, opened  # the crawls really ran on RedisRecrawlScheduler
    assert " passed" in tail and " failed" not in tail
