"""Extensions a test loads into a real ``scrapy crawl`` (a subprocess: ``EXTENSIONS``) to
make one interleaving happen on purpose instead of by luck.

:class:`StopRedisAtRollOver`: in continuous mode with RedisRecrawlScheduler, shut the
crawl's redis-server down (``SHUTDOWN NOSAVE``: gone, nothing on disk) exactly when the
scheduler's ``spider_idle`` handler is about to roll the cycle over. Its own
``spider_idle`` handler is connected when Scrapy builds the extensions, before the
scheduler connects its own at open, so it runs first: the first time the spider is
idle in cycle ``STOP_REDIS_AT_CYCLE`` or later (the cycle's work done, its period not
over), it stops the Redis, says so in the log, and holds the engine until the next
period starts; the scheduler's handler, next, finds the cycle over, the roll-over due
and the Redis gone. The test process starts the redis-server again (empty) once it
has exited. With ``STOP_REDIS_FLUSH``, ``FLUSHALL`` instead: the Redis stays up and
the history is gone when the roll-over runs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from scrapy import signals

from scrapy_recrawl.core.cycle import next_period_start

logger = logging.getLogger(__name__)

#: the line the crawl logs as it stops the Redis (the test waits for the server to exit)
STOPPED = "test hook: stopped the Redis as cycle"
FLUSHED = "test hook: flushed the Redis as cycle"


class StopRedisAtRollOver:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.cycle = crawler.settings.getint("STOP_REDIS_AT_CYCLE")
        # FLUSHALL instead: the Redis answers, without the history
        self.flush = crawler.settings.getbool("STOP_REDIS_FLUSH")
        self.done = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> StopRedisAtRollOver:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_idle, signal=signals.spider_idle)
        return ext

    def spider_idle(self, spider: Any) -> None:
        if self.done:
            return
        frontier = self.crawler.engine._slot.scheduler.frontier
        if frontier.cycle < self.cycle:
            return
        self.done = True
        import redis

        client = redis.Redis.from_url(self.crawler.settings.get("REDIS_URL"))
        if self.flush:
            client.flushall()  # the Redis stays, its data goes (the store is lost)
            logger.warning("%s %d rolls over", FLUSHED, frontier.cycle)
        else:
            client.shutdown(nosave=True)  # returns once the server has closed the connection
            logger.warning("%s %d rolls over", STOPPED, frontier.cycle)
        # the engine held (the reactor is this thread) until the next period starts, at
        # most RECRAWL_CYCLE_PERIOD: the scheduler's idle handler then rolls over
        start = next_period_start(frontier.host.config, frontier.period_start, frontier.now())
        time.sleep(max(0.0, start - frontier.now()) + 0.05)
