"""A shared cycle's queues and dupefilter, in Redis, behind the frontier's fence.

The distributed frontier keeps its requests here, never in Scrapy's scheduler: the
cycle's scored recrawls (a :class:`~scrapy_recrawl.frontier.queues.FifoQueue`,
best first), the new URLs the cycle took from the store's frontier (the backlog,
handed out first, so none waits for ever) and those found in the cycle
(``SCHEDULER_QUEUE_CLASS``), and the cycle's dupefilter, one set per cycle
(``SCHEDULER_DUPEFILTER_CLASS``): scrapy-redis's classes on a single Redis, this
package's on a cluster (frontier/queues.py). Their writes go behind the fence
(frontier/redis.py: :class:`FencedClient`). A value that is not a request is
dropped, said and counted (``recrawl/unreadable_queue_values``), never run
(frontier/serializer.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from scrapy import Request, Spider

from ..core.meta import META_CYCLE, META_ID, META_KIND, META_RANK, META_SCORE
from ..history import HistoryStore
from .base import recrawl_kind
from .queues import FifoQueue
from .redis import FencedClient, RedisFrontier, SpiderKeys

logger = logging.getLogger("scrapy_recrawl.redis_scheduler")


class SharedQueues:
    """One spider's shared queues and its cycles' dupefilters (module docstring)."""

    def __init__(
        self,
        shared: RedisFrontier,
        names: SpiderKeys,
        spider: Spider,
        *,
        queue_cls: type,
        dupefilter_cls: type,
        serializer: Any,
        debug: bool,
        location: str,
        inc_stat: Callable[[str], None],
    ) -> None:
        self.shared = shared
        self.location = location  # the Redis's, for messages
        self.names = names
        self._dupefilter_cls = dupefilter_cls
        self._debug = debug  # DUPEFILTER_DEBUG
        self._inc_stat = inc_stat
        # the queues' and dupefilters' pushes and adds behind the fence (frontier/redis.py):
        # a crawl that outlives a reset of its store re-creates none of their keys
        self.fenced = FencedClient(shared)

        def queue(cls: Any, key: str) -> Any:
            return cls(server=self.fenced, spider=spider, key=key, serializer=serializer)

        self.new = queue(queue_cls, names.queue)
        self.recrawls = queue(FifoQueue, shared.key("recrawls"))
        # the cycle's new URLs from earlier cycles (the store's frontier, in its order),
        # handed out before the cycle's own finds, so none waits for ever
        self.backlog = queue(FifoQueue, shared.key("backlog"))

    def dupefilter_of(self, cycle: int) -> Any:
        """``cycle``'s dupefilter: its set, shared by every process of the cycle."""
        return self._dupefilter_cls(
            self.fenced, key=self.names.dupefilter_of(cycle), debug=self._debug
        )

    # -- out -----------------------------------------------------------------------

    def pop(self, queue: Any) -> Request | None:
        """The queue's next request; a value that is not one (checked as data by the
        serializer, frontier/serializer.py, never run) is off the queue then: it is
        said, counted, and the next one is taken."""
        while True:
            try:
                return queue.pop()  # type: ignore[no-any-return]
            except (ValueError, TypeError, KeyError) as exc:
                self._inc_stat("recrawl/unreadable_queue_values")
                logger.error(
                    "recrawl: a value of the queue %s in the Redis at %s is not a request, "
                    "dropped: %s",
                    queue.key,
                    self.location,
                    exc,
                )

    def pop_new(self) -> Request | None:
        """The next new URL: the backlog's first, then the cycle's own finds."""
        request = self.pop(self.backlog)
        return self.pop(self.new) if request is None else request

    def waiting_new(self) -> int:
        """New URLs queued for the cycle, by all processes, not handed out yet."""
        return len(self.backlog) + len(self.new)

    def drain_new(self) -> list[Request]:
        """Every new URL left (the cycle closes: they go to the store's frontier)."""
        left = list(iter(lambda: self.pop(self.backlog), None))
        return left + list(iter(lambda: self.pop(self.new), None))

    # -- in ------------------------------------------------------------------------

    def push_recrawls(
        self,
        store: HistoryStore,
        cycle: int,
        dupefilter: Any,
        ids: np.ndarray,
        scores: np.ndarray,
    ) -> int:
        """Push the stored request dicts of ``ids``, best first, in batches; mark them
        seen in ``dupefilter`` (the cycle's) and as the cycle's picks."""
        dicts = store.requests(ids)
        missing = [i for i, d in enumerate(dicts) if d is None]
        if missing:
            urls = store.urls(ids[missing])
            for i, url in zip(missing, urls, strict=True):
                dicts[i] = {"url": url}

        def entries() -> Iterator[tuple[dict[str, Any], str]]:
            for rank, (url_id, d) in enumerate(zip(ids.tolist(), dicts, strict=True)):
                assert d is not None
                meta = {
                    META_CYCLE: cycle,
                    META_ID: int(url_id),
                    META_RANK: rank,
                    META_KIND: recrawl_kind(float(scores[rank])),
                }
                try:
                    request = Request(
                        d["url"], method=d.get("method", "GET"), body=d.get("body") or b""
                    )
                    if set(d) == {"url"}:
                        d = request.to_dict()  # no stored request: a GET of its URL
                except (ValueError, TypeError, UnicodeError) as exc:
                    # a URL read back from Redis that is not one (data, never run)
                    self._inc_stat("recrawl/unreadable_stored_requests")
                    logger.warning(
                        "recrawl: URL id %d of the history store at %s is not a URL, not "
                        "recrawled: %s",
                        url_id,
                        store.location,
                        exc,
                    )
                    continue
                d = {
                    **d,
                    "meta": {**(d.get("meta") or {}), **meta, META_SCORE: float(scores[rank])},
                }
                yield d, dupefilter.request_fingerprint(request)

        return self.shared.push_recrawls(self.recrawls, cycle, dupefilter.key, entries())
