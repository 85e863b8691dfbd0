"""scrapy-redis's own scheduler tests (its ``SchedulerTest``), run against
RedisRecrawlScheduler on a real redis-server.

``tests/upstream/scrapy_redis_0_9_1_test_scrapy_redis.py`` is
``tests/test_scrapy_redis.py`` of the scrapy-redis 0.9.1 sdist (MIT licence,
``tests/upstream/scrapy_redis_LICENSE``), unchanged but for ``ruff format``.
It is loaded as a module with ``REDIS_HOST``/``REDIS_PORT`` pointing at the
test server; ``SchedulerTest`` is then subclassed with the scheduler swapped:
the module's ``Scheduler`` name is RedisRecrawlScheduler, and the crawler's
settings name it as ``SCHEDULER`` (so the history store goes to the same Redis,
under the test's own key prefix, which its ``tearDown`` deletes).
Upstream's own classes run too, against scrapy-redis itself, as a control.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
from pathlib import Path

import pytest

from scrapy_recrawl import RedisRecrawlScheduler
from scrapy_recrawl.frontier import queues

from .redis_server import RedisServer

UPSTREAM = Path(__file__).parent / "upstream" / "scrapy_redis_0_9_1_test_scrapy_redis.py"

_server = RedisServer()
_server.start()
# upstream reads REDIS_HOST/REDIS_PORT when it is imported, so the server starts when
# this module is collected, in every pytest-xdist worker and under `-m "not slow"`
# too, where none of its tests may run here: stopped when the process exits, or it
# would outlive the test session
atexit.register(_server.__exit__, None, None, None)
os.environ["REDIS_HOST"], os.environ["REDIS_PORT"] = "127.0.0.1", str(_server.port)
_spec = importlib.util.spec_from_file_location("scrapy_redis_upstream_tests", UPSTREAM)
upstream = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(upstream)
del os.environ["REDIS_HOST"], os.environ["REDIS_PORT"]


@pytest.fixture(scope="module", autouse=True)
def _stop_server():
    yield
    _server.stop()


_original_get_spider = upstream.get_spider


def _get_spider_with_recrawl(*args, **kwargs):
    settings = dict(kwargs.pop("settings_dict", None) or {})
    settings.setdefault("SCHEDULER", "scrapy_recrawl.RedisRecrawlScheduler")
    # every key of the test under its prefix, so its tearDown leaves the server clean
    settings.setdefault("RECRAWL_REDIS_KEY", "scrapy_redis:tests:recrawl")
    settings.setdefault("RECRAWL_REDIS_SCHEDULER_KEY", "scrapy_redis:tests:%(spider)s:recrawl")
    # upstream's scheduler test names SCHEDULER_SERIALIZER = "pickle" on purpose; that is
    # refused without this opt-in (tests/test_no_pickle.py)
    settings.setdefault("RECRAWL_ALLOW_PICKLE", True)
    return _original_get_spider(*args, settings_dict=settings, **kwargs)


class TestUpstreamSchedulerOnRecrawl(upstream.SchedulerTest):
    """scrapy-redis's SchedulerTest, verbatim, with RedisRecrawlScheduler."""

    def setUp(self):
        self._saved = upstream.Scheduler, upstream.get_spider
        upstream.Scheduler, upstream.get_spider = RedisRecrawlScheduler, _get_spider_with_recrawl
        super().setUp()
        assert isinstance(self.scheduler, RedisRecrawlScheduler)

    def tearDown(self):
        super().tearDown()
        upstream.Scheduler, upstream.get_spider = self._saved
        # the history store's keys carry hash tags ({scrapy_redis:tests:recrawl}...), which
        # upstream's clean-up (its 'scrapy_redis:tests:*') does not match: ours to delete
        for key in self.server.scan_iter(match="{scrapy_redis:tests:*"):
            self.server.delete(key)
        leftover = self.server.keys("*recrawl*")
        assert leftover == [], leftover


class TestUpstreamControl(upstream.SchedulerTest):
    """The same tests against scrapy-redis's own scheduler: the server is sound."""


class TestUpstreamQueues(upstream.PriorityQueueTest):
    """The priority queue RedisRecrawlScheduler reuses for new URLs."""


class TestUpstreamFifo(upstream.FifoQueueTest):
    """scrapy-redis's FIFO queue (a SCHEDULER_QUEUE_CLASS that works on a cluster too)."""


class TestUpstreamOnOurPriorityQueue(upstream.PriorityQueueTest):
    """Upstream's queue tests on this package's queues (frontier/queues.py): the
    cluster mode's default for new URLs ..."""

    queue_cls = queues.PriorityQueue


class TestUpstreamOnOurFifo(upstream.FifoQueueTest):
    """... the recrawl queue ..."""

    queue_cls = queues.FifoQueue


class TestUpstreamOnOurLifo(upstream.LifoQueueTest):
    """... and the LIFO one."""

    queue_cls = queues.LifoQueue


class TestUpstreamOnOurDupeFilter(upstream.DupeFilterTest):
    """Upstream's dupefilter test on this package's (the cluster mode's default)."""

    def setUp(self):
        super().setUp()
        self.df = queues.RedisDupeFilter(self.server, self.key)
