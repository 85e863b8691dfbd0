"""The distributed frontier's side of the store's epoch: which history it writes for.

``scrapy recrawl-reset`` (or a Redis that lost its data) gives the history store a
new epoch; the frontier's keys carry the epoch they were written under, and a write
under another is refused by Redis (frontier/redis.py: the fence). This module is what
the frontier does about it: it takes the store's epoch at open, checks it at each
cycle opened, joined or adopted, and, when a write is refused, asks the store: lost
(the crawl stops with one line, history/epoch.py), or a fresh history the crawl goes
on with (``RECRAWL_ON_STORE_LOSS = "continue"``: the frontier takes its epoch).

A store without an epoch (one in this process) is never fenced: the frontier then
keeps a token of its own (RedisFrontier.take_epoch).
"""

from __future__ import annotations

from typing import Any

from ..history import StoreLost
from ..history.base import fenced
from .redis import RedisFrontier


class EpochFence:
    """The store's epoch as the distributed frontier follows it (module docstring)."""

    def __init__(self, store: Any, location: str, count_refused: Any) -> None:
        self.store = store
        self.location = location  # the Redis's, for messages
        self._count_refused = count_refused  # the stat recrawl/frontier_writes_refused

    def epoch(self) -> str | None:
        """The store's epoch (None: a store without one)."""
        fence = fenced(self.store)
        return None if fence is None else fence.epoch

    def check(self) -> None:
        """Still the history this process opened? StoreLost (said once, the spider
        closing) when not."""
        fence = fenced(self.store)
        if fence is not None:
            fence.check_epoch()

    def refused(self, shared: RedisFrontier, found: str | None) -> bool:
        """A write of this process's refused by the frontier's fence: its store was reset
        (or lost) under it. Counted; the store's own check then says so in one line and
        stops the crawl (history/epoch.py); under RECRAWL_ON_STORE_LOSS = "continue" the
        store has a fresh epoch, which the frontier takes when nobody took another one
        meanwhile (True: write again). ``found``: what the frontier's epoch key holds."""
        self._count_refused("recrawl/frontier_writes_refused")
        fence = fenced(self.store)
        if fence is not None:
            fence.check_epoch()  # StoreLost: said once, the spider closing
            epoch = fence.epoch
            if epoch is not None and epoch != shared.epoch and found in (None, epoch):
                shared.take_epoch(epoch)
                return True
        # the store is as it was, its frontier not: reset alone, or its keys evicted
        exc = StoreLost(self.location, shared.key("epoch"), shared.epoch, None, found)
        if fence is not None and fence.on_lost is not None:
            fence.on_lost(exc)
        raise exc
