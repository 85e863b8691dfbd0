"""Shared queues and a dupefilter that work on a single Redis and on a Redis Cluster.

The cycle's recrawls are always in this module's :class:`FifoQueue` (the same
list and encoding as scrapy-redis's). For the new URLs and the cycle's dupefilter,
a single Redis keeps scrapy-redis's classes by default; a cluster gets these.

scrapy-redis has no Redis Cluster support: its ``PriorityQueue`` pops with
MULTI/EXEC over a pipeline (redis-py's cluster client runs no such pipeline
unless every key is in one slot, and then only with ``transaction=True``), and
its dupefilter, named in ``DUPEFILTER_CLASS``, is built by Scrapy on a single-
Redis connection of its own. With ``RECRAWL_REDIS_CLUSTER = True`` the frontier
uses these classes instead, behind the same interfaces:

* queues (scrapy-redis's ``Base``: ``push``, ``pop``, ``__len__``, ``clear``):
  :class:`PriorityQueue` (the default; one sorted set, popped with the single
  atomic command ``ZPOPMIN``), :class:`FifoQueue` and :class:`LifoQueue` (one
  list); requests serialised as data (frontier/serializer.py), never pickled;
* :class:`RedisDupeFilter` (``request_seen``, ``request_fingerprint``,
  ``clear``, ``close``, ``log``): one set per cycle, Scrapy's request fingerprint.

Every key is one key: each command touches one slot, and the frontier names the
keys of a spider under one hash tag (frontier/redis.py: :func:`spider_keys`), so
a spider's queue, dupefilter and cycle state live on one master.

:func:`queue_and_dupefilter` picks the classes from the settings, and refuses,
in one line, a scrapy-redis class that cannot work on a cluster.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.utils.misc import load_object
from scrapy_redis.queue import Base

from ..history.redis_connection import CLUSTER_SETTING
from ..settings import RecrawlSettingError
from . import serializer as request_codec

logger = logging.getLogger("scrapy_recrawl.redis_scheduler")

#: the classes cluster mode uses when SCHEDULER_QUEUE_CLASS / SCHEDULER_DUPEFILTER_CLASS are unset
CLUSTER_QUEUE = "scrapy_recrawl.frontier.queues.PriorityQueue"
CLUSTER_DUPEFILTER = "scrapy_recrawl.frontier.queues.RedisDupeFilter"


class _DataQueue(Base):
    """scrapy-redis's ``Base`` whose serializer, when none is given, is the request
    codec (frontier/serializer.py: data), never scrapy-redis's pickle."""

    def __init__(self, server: Any, spider: Any, key: str, serializer: Any = None) -> None:
        super().__init__(server, spider, key, request_codec if serializer is None else serializer)


class PriorityQueue(_DataQueue):
    """A spider's requests by priority, highest first (scrapy-redis's order: the
    score is ``-priority``), in one sorted set; popped with ``ZPOPMIN``, one atomic
    command, so two processes never pop the same request."""

    def __len__(self) -> int:
        return int(self.server.zcard(self.key))

    def push(self, request: Request) -> None:
        self.server.zadd(self.key, {self._encode_request(request): -request.priority})

    def pop(self, timeout: int = 0) -> Request | None:
        popped = self.server.zpopmin(self.key)
        if not popped:
            return None
        return self._decode_request(popped[0][0])  # type: ignore[no-any-return]


class FifoQueue(_DataQueue):
    """A spider's requests first in, first out, in one list (``timeout`` > 0: wait
    that many seconds for one, ``BRPOP``)."""

    def __len__(self) -> int:
        return int(self.server.llen(self.key))

    def push(self, request: Request) -> None:
        self.server.lpush(self.key, self._encode_request(request))

    #: the commands that take from this end of the list (waiting, and not)
    _blocking_pop, _pop = "brpop", "rpop"

    def pop(self, timeout: int = 0) -> Request | None:
        if timeout > 0:
            got = getattr(self.server, self._blocking_pop)([self.key], timeout)
            data = None if got is None else got[1]
        else:
            data = getattr(self.server, self._pop)(self.key)
        return None if data is None else self._decode_request(data)  # type: ignore[no-any-return]


class LifoQueue(FifoQueue):
    """A spider's requests last in, first out, in one list (``BLPOP`` with a timeout)."""

    _blocking_pop, _pop = "blpop", "lpop"


class RedisDupeFilter:
    """The requests seen in one set ``key`` (one per cycle, named by the frontier).

    The fingerprint is Scrapy's (``scrapy.utils.request.fingerprint``), hex."""

    def __init__(self, server: Any, key: str, debug: bool = False) -> None:
        self.server = server
        self.key = key
        self.debug = debug
        self._logged = False

    def request_fingerprint(self, request: Request) -> str:
        from scrapy.utils.request import fingerprint

        return fingerprint(request).hex()

    def request_seen(self, request: Request) -> bool:
        """Adds the request's fingerprint; True if it was there already."""
        return int(self.server.sadd(self.key, self.request_fingerprint(request))) == 0

    def clear(self) -> None:
        self.server.delete(self.key)

    def open(self) -> None:
        pass

    def close(self, reason: str = "") -> None:
        self.clear()

    def log(self, request: Request, spider: Any) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
        elif not self._logged:
            logger.debug(
                "Filtered duplicate request %(request)s - no more duplicates will be shown "
                "(see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
            )
            self._logged = True


def queue_and_dupefilter(settings: Any, cluster: bool) -> tuple[type, type]:
    """The new-URL queue class and the cycle's dupefilter class.

    A single Redis: scrapy-redis's (``SCHEDULER_QUEUE_CLASS``,
    ``SCHEDULER_DUPEFILTER_CLASS`` or a scrapy-redis ``DUPEFILTER_CLASS``, else its
    defaults), as before. A cluster: the classes named, else this module's; refused
    in one line: scrapy-redis's PriorityQueue (it pops with MULTI) and scrapy-redis's
    dupefilter as ``DUPEFILTER_CLASS`` (Scrapy builds it on one node's connection)."""
    from scrapy_redis import defaults
    from scrapy_redis.dupefilter import RFPDupeFilter
    from scrapy_redis.queue import PriorityQueue as RedisPriorityQueue

    queue_path = settings.get("SCHEDULER_QUEUE_CLASS")
    df_path = settings.get("SCHEDULER_DUPEFILTER_CLASS")
    scrapy_df = settings.get("DUPEFILTER_CLASS")
    if not cluster:
        if not df_path and "scrapy_redis" in str(scrapy_df or ""):
            df_path = scrapy_df
        return (
            load_object(queue_path or defaults.SCHEDULER_QUEUE_CLASS),
            load_object(df_path or defaults.SCHEDULER_DUPEFILTER_CLASS),
        )
    queue_cls = load_object(queue_path or CLUSTER_QUEUE)
    if isinstance(queue_cls, type) and issubclass(queue_cls, RedisPriorityQueue):
        raise RecrawlSettingError(
            f"SCHEDULER_QUEUE_CLASS={queue_path!r} pops with MULTI across a pipeline, which "
            f"a Redis Cluster ({CLUSTER_SETTING} = True) does not run: leave it unset "
            f"({CLUSTER_QUEUE})"
        )
    if scrapy_df:
        built_by_scrapy = load_object(scrapy_df) if isinstance(scrapy_df, str) else scrapy_df
        if isinstance(built_by_scrapy, type) and issubclass(built_by_scrapy, RFPDupeFilter):
            raise RecrawlSettingError(
                f"DUPEFILTER_CLASS={scrapy_df!r} connects to one Redis node on its own, which "
                f"a Redis Cluster ({CLUSTER_SETTING} = True) refuses: leave DUPEFILTER_CLASS "
                f"to Scrapy (the shared set per cycle is {CLUSTER_DUPEFILTER})"
            )
    return queue_cls, load_object(df_path or CLUSTER_DUPEFILTER)


__all__ = [
    "CLUSTER_DUPEFILTER",
    "CLUSTER_QUEUE",
    "FifoQueue",
    "LifoQueue",
    "PriorityQueue",
    "RedisDupeFilter",
    "queue_and_dupefilter",
]
