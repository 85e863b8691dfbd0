"""How long a Redis outage is waited out before the crawl gives up.

The scheduler keeps the spider open while the shared Redis may come back
(``RECRAWL_REDIS_OUTAGE_SECONDS``), logging once when it goes and once when it
returns; past the limit it closes the spider with an error naming the Redis
(:class:`Outage`: the clock, the requests held meanwhile, the engine asked again).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import Request

from ..history import HistoryStoreError, StoreLost

if TYPE_CHECKING:
    from .base import SchedulerHost

logger = logging.getLogger("scrapy_recrawl.redis_scheduler")

#: the close reason of a crawl whose Redis stayed away too long (exit status 1)
UNAVAILABLE_REASON = "recrawl_redis_unavailable"


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


class Outage:
    """A frontier's Redis going away mid-crawl, as the scheduler lives through it: the
    outage counted (``recrawl/redis_outages``) and waited out, the requests enqueued
    meanwhile held in this process, the engine asked again soon (its own heartbeat is
    5 s); past the limit the spider closes (``recrawl_redis_unavailable``)."""

    def __init__(self, host: SchedulerHost, location: str, limit_seconds: float) -> None:
        self.host = host
        self.clock = OutageClock(location, limit_seconds)
        #: requests enqueued while the Redis was away, queued when it answers again
        self.held: list[Request] = []
        self._poke_call: Any = None

    def ok(self) -> None:
        self.clock.ok()

    def failed(self, exc: BaseException) -> bool:
        """A call failed: True while the Redis may come back (the spider kept open);
        False when the crawl stops (the limit passed, or the history lost: no outage
        to wait out, said by the store: history/epoch.py). A non-Redis error is raised."""
        if isinstance(exc, StoreLost):
            return False
        verdict = self.clock.failed(exc)
        if verdict == "new":
            self.host.inc_stat("recrawl/redis_outages")
        if verdict != "over":
            return True
        self.host.engine_link.close_spider(UNAVAILABLE_REASON)
        return False

    def hold(self, request: Request, exc: BaseException) -> None:
        """``request`` could not be queued (the Redis is away): kept until it answers."""
        if self.clock.since is None:
            self.failed(exc)
        self.held.append(request)
        self.poke(1.0)

    def flush_held(self) -> None:
        """Queue the requests held, oldest first (an error leaves the rest held)."""
        while self.held:
            self.host.enqueue_now(self.held[0])
            self.held.pop(0)

    def poke(self, delay: float) -> None:
        """Ask the engine for the next request in ``delay`` seconds, once at a time."""
        if self._poke_call is not None and self._poke_call.active():
            return
        self._poke_call = self.host.engine_link.poke(delay)

    def cancel(self) -> None:
        if self._poke_call is not None and self._poke_call.active():
            self._poke_call.cancel()
