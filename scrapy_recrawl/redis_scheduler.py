"""The recrawl scheduler with its cycle in Redis, shared by many ``scrapy crawl`` s.

``SCHEDULER = "scrapy_recrawl.RedisRecrawlScheduler"`` (plus the add-on or the
middleware) on every machine, all pointing at one Redis (``REDIS_URL``; a node of a
Redis Cluster with ``RECRAWL_REDIS_CLUSTER = True``), and the processes share one
history store, one recrawl queue, one new-URL queue, one dupefilter and one budget. It is :class:`~scrapy_recrawl.scheduler.RecrawlScheduler`
with the distributed frontier (:mod:`scrapy_recrawl.frontier.distributed`, where
the whole story is told, and docs/distributed.md); nothing else differs.
"""

from __future__ import annotations

from typing import Any

from .frontier.distributed import DistributedFrontier
from .scheduler import RecrawlScheduler


class RedisRecrawlScheduler(RecrawlScheduler):
    """RecrawlScheduler whose cycles, budget and queues live in Redis (module docstring)."""

    frontier_class = "scrapy_recrawl.frontier.distributed.DistributedFrontier"
    #: tells open_store() to default RECRAWL_STORE to the Redis of REDIS_URL
    recrawl_store_backend = "redis"
    frontier: DistributedFrontier

    @property
    def persist(self) -> bool:
        """scrapy-redis's ``SCHEDULER_PERSIST``: an unfinished cycle is kept between runs."""
        return self.frontier.persist

    @persist.setter
    def persist(self, value: bool) -> None:
        self.frontier.persist = value

    def _mq(self) -> Any:
        # Scrapy's default DownloaderAwarePriorityQueue needs crawler.engine, which a
        # scheduler built and opened outside a crawl (scrapy-redis's SchedulerTest)
        # has not got: those get the plain priority queue for their continuations.
        try:
            return super()._mq()
        except RuntimeError:
            from scrapy.pqueues import ScrapyPriorityQueue

            self.pqclass = ScrapyPriorityQueue
            return super()._mq()
