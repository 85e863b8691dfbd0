"""How long a Redis outage is waited out before the crawl gives up.

The scheduler keeps the spider open while the shared Redis may come back
(``RECRAWL_REDIS_OUTAGE_SECONDS``), logging once when it goes and once when it
returns; past the limit it closes the spider with an error naming the Redis.
"""

from __future__ import annotations

import logging
import time

from ..history import HistoryStoreError

logger = logging.getLogger("scrapy_recrawl.redis_scheduler")


def is_redis_error(exc: BaseException) -> bool:
    """An error of the Redis connection (redis-py, the socket, the store over it; a
    cluster's own, which redis-py does not derive from RedisError)."""
    import redis
    from redis.exceptions import RedisClusterException

    return isinstance(exc, (redis.RedisError, RedisClusterException, OSError, HistoryStoreError))


class OutageClock:
    """When the Redis at ``location`` went away, and whether to wait any longer."""

    def __init__(self, location: str, limit_seconds: float) -> None:
        self.location = location
        self.limit_seconds = limit_seconds
        self.since: float | None = None

    def ok(self) -> None:
        """A Redis call went through: an outage, if any, is over."""
        if self.since is not None:
            logger.warning(
                "recrawl: the Redis at %s is back after %.1fs",
                self.location,
                time.monotonic() - self.since,
            )
            self.since = None

    def failed(self, exc: BaseException) -> str:
        """A Redis call failed: ``"new"`` (the outage starts), ``"waiting"`` (within the
        limit) or ``"over"`` (give up). A non-Redis error is raised again."""
        if not is_redis_error(exc):
            raise exc
        now = time.monotonic()
        if self.since is None:
            self.since = now
            logger.error(
                "recrawl: the Redis at %s is unreachable (%s); retrying for up to %ss "
                "(RECRAWL_REDIS_OUTAGE_SECONDS)",
                self.location,
                exc,
                self.limit_seconds,
            )
            return "new"
        if now - self.since < self.limit_seconds:
            return "waiting"
        logger.error(
            "recrawl: the Redis at %s has been unreachable for %.0fs (%s): closing the spider",
            self.location,
            now - self.since,
            exc,
        )
        return "over"
