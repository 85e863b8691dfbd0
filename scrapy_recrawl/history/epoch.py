"""A shared store's identity (its epoch), and what a crawl does when the store is lost.

A Redis that restarts without persistence, a ``FLUSHALL``, an eviction or a
``recrawl-reset`` leaves the keys of a history store empty or replaced while a
crawl still runs. Without an identity the crawl would go on writing a fresh
history over the gap, fetching pages it already had and skipping others, and
exit 0. So a store that can be lost under a crawl (the Redis store) writes an
*epoch* when it is created -- a random token and the creation time -- and each
process remembers the one it opened. Every write script refuses to write when
the epoch differs (nothing is half-written into an emptied store), and the
crawl checks it at each cycle start or join and every
:data:`CHECK_SECONDS` (store_loss.py), so a quiet crawl notices too.

The same check keeps the crawl's **lease** on the store (a store that offers
``hold()``, as the Redis store does: history/redis_liveness.py): taken when the
crawl opens the store, stamped with the Redis's clock at each check, left at a
clean close, and gone ``RECRAWL_REDIS_WORKER_TIMEOUT`` after the last stamp of a
crawl that was killed. ``scrapy recrawl-reset`` refuses while a live crawl holds it.

What happens then is ``RECRAWL_ON_STORE_LOSS``: ``"stop"`` (default) logs one
error line naming the store and what to do, and closes the spider with
:data:`STORE_LOST_REASON` (``scrapy crawl`` exits 1); ``"continue"`` logs a
warning and goes on with a fresh history under a new epoch.

This module is plain data; the crawl's watch -- the timer, the close of the spider --
is Scrapy's side, in scrapy_recrawl/store_loss.py.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..settings import get
from .base import HistoryStoreError

#: The close reason of a crawl stopped for a lost store (startup.FAILED_CLOSE_REASONS).
STORE_LOST_REASON = "recrawl_store_lost"

#: Seconds between two checks of the epoch while the crawl runs (one HGET each).
CHECK_SECONDS = 2.0

#: The values of RECRAWL_ON_STORE_LOSS.
POLICIES = ("stop", "continue")


def on_store_loss(settings: Any) -> str:
    """``RECRAWL_ON_STORE_LOSS``, checked: ``"stop"`` or ``"continue"``."""
    value = get(
        settings, "RECRAWL_ON_STORE_LOSS", str, lambda v: v in POLICIES, "'stop' or 'continue'"
    )
    return str(value)


def new_epoch() -> tuple[str, float]:
    """A fresh identity: a random token (no two stores share one) and the time now."""
    return uuid.uuid4().hex, time.time()


def _when(created: float | None) -> str:
    if created is None:
        return "an unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(created))


class StoreLost(HistoryStoreError):
    """The store this process opened is gone (emptied) or was replaced by another one."""

    def __init__(
        self,
        location: str,
        key: str,
        expected: str | None,
        created: float | None,
        found: str | None,
    ) -> None:
        self.location, self.key = location, key
        self.expected, self.created, self.found = expected, created, found
        what = "vanished" if found is None else f"was replaced (now epoch {found})"
        super().__init__(
            f"the history store at {location} (key {key!r}, epoch {expected} created "
            f"{_when(created)}) {what} while this process used it: the Redis lost its data "
            "(restarted without persistence, FLUSHALL/FLUSHDB, eviction) or the store was "
            "reset. Nothing more is written into it; keep it with Redis persistence "
            "(appendonly yes, maxmemory-policy noeviction: docs/distributed.md), or set "
            "RECRAWL_ON_STORE_LOSS = 'continue' to go on with a fresh history"
        )
