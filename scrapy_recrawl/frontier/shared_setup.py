"""What a shared cycle needs before it opens: its settings read and its Redis reached.

RedisRecrawlScheduler's frontier reads its settings when the scheduler is built and
pings its Redis then, as scrapy-redis's scheduler does: a setting out of range, a
pickling serializer, a key template a cluster would split, a single Redis named
where a cluster is (or the reverse), a Redis that does not answer -- each is one
line naming the setting or the Redis, and the crawl does not start.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..history import HistoryStoreError
from ..history.redis_connection import cluster_mode, redis_from_settings
from ..history.redis_liveness import worker_timeout
from ..settings import RecrawlSettingError, get
from . import serializer as request_serializer
from .queues import queue_and_dupefilter
from .redis import spider_keys

logger = logging.getLogger("scrapy_recrawl.redis_scheduler")


@dataclass
class SharedSetup:
    """A distributed frontier's settings, and its Redis client (pinged)."""

    lock_seconds: float  # RECRAWL_REDIS_LOCK_SECONDS
    worker_timeout: float  # RECRAWL_REDIS_WORKER_TIMEOUT
    outage_seconds: float  # RECRAWL_REDIS_OUTAGE_SECONDS
    serializer: Any  # the queues' (SCHEDULER_SERIALIZER, checked: frontier/serializer.py)
    persist: bool  # SCHEDULER_PERSIST: an unfinished cycle is kept between runs
    cluster: bool  # RECRAWL_REDIS_CLUSTER
    queue_cls: type  # the new URLs' queue (frontier/queues.py)
    dupefilter_cls: type  # the cycle's dupefilter
    server: Any  # the redis-py client
    location: str  # the Redis's URL, without credentials, for messages


def shared_setup(settings: Any) -> SharedSetup:
    """Read the shared frontier's settings and reach its Redis (module docstring).
    Raises RecrawlSettingError or HistoryStoreError, said in one line here."""
    from scrapy_redis import defaults

    try:
        lock_seconds = get(
            settings, "RECRAWL_REDIS_LOCK_SECONDS", (int, float), lambda v: v > 0, "seconds > 0"
        )
        timeout = worker_timeout(settings)
        outage_seconds = get(
            settings,
            "RECRAWL_REDIS_OUTAGE_SECONDS",
            (int, float),
            lambda v: v >= 0,
            "seconds >= 0",
        )
        # requests as data unless pickling is allowed on purpose (frontier/serializer.py)
        serializer = request_serializer.choose(settings)
    except RecrawlSettingError as exc:
        logger.error("recrawl: %s", exc)
        raise
    persist = settings.getbool("SCHEDULER_PERSIST", defaults.SCHEDULER_PERSIST)
    location: str | None = None
    try:
        cluster = cluster_mode(settings)
        # the key templates checked now (one hash tag per spider on a cluster; the
        # names are made at open()) and the queue / dupefilter classes (this
        # package's own on a cluster: cluster.py)
        spider_keys(settings, "spider", cluster)
        queue_cls, dupefilter_cls = queue_and_dupefilter(settings, cluster)
        server, location = redis_from_settings(settings)
        # as scrapy-redis's scheduler does: fail now, not mid-crawl (and a single
        # Redis named where a cluster is, or the reverse, is said here)
        server.ping()
    except (RecrawlSettingError, HistoryStoreError) as exc:
        # a setting, a cluster named where a single Redis is (or the reverse:
        # RedisModeError), a cluster unreachable: said as it is, in one line
        logger.error("recrawl: %s", exc)
        raise
    except Exception as exc:  # noqa: BLE001 -- redis-py's errors, OSError
        message = (
            f"cannot reach the Redis at {location or 'REDIS_URL'} (REDIS_URL, REDIS_HOST, "
            f"REDIS_PORT, REDIS_PARAMS) for RedisRecrawlScheduler: {exc}"
        )
        logger.error("recrawl: %s", message)
        raise HistoryStoreError(message) from exc
    return SharedSetup(
        lock_seconds=lock_seconds,
        worker_timeout=timeout,
        outage_seconds=outage_seconds,
        serializer=serializer,
        persist=persist,
        cluster=cluster,
        queue_cls=queue_cls,
        dupefilter_cls=dupefilter_cls,
        server=server,
        location=location,
    )
