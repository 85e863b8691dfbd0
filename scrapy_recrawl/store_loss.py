"""A crawl's watch over a shared store's epoch and lease: the Scrapy side of
history/epoch.py.

history/epoch.py says what a store's epoch is and what ``RECRAWL_ON_STORE_LOSS``
means; here a crawl acts on it: the store's epoch is checked every
:data:`~scrapy_recrawl.history.epoch.CHECK_SECONDS` on a Twisted timer while the spider
is open, the crawl's lease on the store is stamped at each check, and a lost store
closes the spider with :data:`~scrapy_recrawl.history.epoch.STORE_LOST_REASON`
(``scrapy crawl`` exits 1: startup.FAILED_CLOSE_REASONS).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from .history.base import HistoryStoreError, fenced
from .history.epoch import CHECK_SECONDS, STORE_LOST_REASON, StoreLost

logger = logging.getLogger("scrapy_recrawl.history")


def watch_store_loss(crawler: Any, store: Any, *, clock: Any = None) -> Callable[[], None]:
    """Stop ``crawler``'s crawl, with one error line, when its store is lost, and check the
    store's epoch every :data:`CHECK_SECONDS` while the spider is open (a store without an
    epoch, e.g. SQLite, is not watched). A fenced store (``"fenced"`` declared:
    history/base.py FencedStore) is held for the crawl from now (its lease, history/epoch.py), for ``RECRAWL_REDIS_WORKER_TIMEOUT``
    after each check; the checks then come at least three times within that timeout, so
    a live crawl never looks gone. Returns what stops the checks: called when the store
    is closed before the spider (the scheduler's close() releases it). ``clock``: the
    check's timer's (Twisted's IReactorTime; None: the reactor), a test's
    ``twisted.internet.task.Clock``."""
    fence = fenced(store)
    if fence is None:
        return lambda: None
    check = fence.check_epoch
    from .history.redis_liveness import worker_timeout

    timeout = worker_timeout(crawler.settings)
    fence.hold(timeout)  # held for the crawl: its lease, refreshed by each check
    every = max(0.1, min(CHECK_SECONDS, timeout / 3))  # (a timer, not a busy loop)

    said: list[StoreLost] = []

    def lost(exc: StoreLost) -> None:
        if said:
            return  # one line per crawl; every later refusal is the same news
        said.append(exc)
        logger.error("recrawl: %s", exc)
        if crawler.stats is not None:
            crawler.stats.set_value("recrawl/store_lost", 1)
        engine = getattr(crawler, "engine", None)
        if engine is not None and getattr(engine, "spider", None) is not None:
            deferred_from_coro(engine.close_spider_async(reason=STORE_LOST_REASON))

    store.on_lost = lost
    loop: list[Any] = []

    def check_quietly() -> None:
        try:
            check()
        except StoreLost:
            pass  # said by lost(), or "continue" went on
        except HistoryStoreError:
            pass  # unreachable: the scheduler's outage handling says so

    def start(spider: Any = None) -> None:
        # here, not at open: the add-on opens the store before Scrapy installs its
        # reactor, and a LoopingCall built takes (installs) the reactor as its clock
        call = LoopingCall(check_quietly)
        if clock is not None:
            call.clock = clock
        call.start(every, now=False)
        loop.append(call)

    def stop() -> None:
        while loop:
            call = loop.pop()
            if call.running:
                call.stop()

    crawler.signals.connect(start, signal=signals.spider_opened, weak=False)
    crawler.signals.connect(stop, signal=signals.spider_closed, weak=False)
    crawler.signals.connect(stop, signal=signals.engine_stopped, weak=False)
    return stop
