"""The recrawl scheduler: Scrapy's scheduler plus a scored recrawl queue and a budget.

Three streams of requests, handed to the engine in this order:

1. *Continuations* — start requests, redirects, retries and ``dont_filter``
   requests — go through Scrapy's own queues (the inherited
   :class:`scrapy.core.scheduler.Scheduler`: priorities, dupefilter, JOBDIR)
   and are never held back by the budget.
2. *Recrawls* — known URLs picked by the scorer when the cycle starts, rebuilt
   from their stored request dicts (callbacks and meta survive), best score
   first, through the download slots like ``DownloaderAwarePriorityQueue``.
3. *New URLs* — never fetched, discovered by the spider — go through the
   dupefilter into a second Scrapy priority queue, ordered by the spider's own
   priority; those the cycle has no budget for wait in the store's frontier.

A spider request for a URL the store already knows is not fetched again on
the spider's say-so: its recrawl is the scorer's decision. Each URL is fetched
at most once per cycle, whichever of these streams (or a probe) asks for it
(the frontier keeps the cycle's fetched URLs: frontier/base.py). Requests that
are not the spider's pages (:mod:`scrapy_recrawl.scope`: sitemaps, robots.txt,
non-GET, ``dont_recrawl``) are continuations, never budgeted nor kept; under
``scrapy shell`` / ``fetch`` / ``parse`` this is Scrapy's scheduler, nothing more.

In a per-run cycle with no budget (the warm-up cycles) there is nothing to
count, so new URLs share Scrapy's own queues: request order, priorities and
JOBDIR persistence are then exactly Scrapy's scheduler's (docs/scheduler.md:
Scrapy's own scheduler, engine and crawl tests pass against this class).

Cycles: one ``scrapy crawl`` is one cycle (cron-style), or, with
``RECRAWL_CONTINUOUS``, the spider stays open and opens one cycle per
``RECRAWL_CYCLE_PERIOD``: a cycle ends when its work is done (its budget handed
out or its queues empty, nothing in flight) or ``RECRAWL_CYCLE_SECONDS`` have
passed, and the crawl waits idle until the next period starts.

The cycle is decided by the cycle core (:mod:`scrapy_recrawl.core.cycle`); where
it lives -- this process, or a Redis shared by many -- is the scheduler's
*frontier* (:mod:`scrapy_recrawl.frontier`), named by :attr:`frontier_class`:
``RedisRecrawlScheduler`` is this class with the distributed frontier.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
from scrapy import Request, Spider, signals
from scrapy.core.scheduler import Scheduler
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import request_from_dict
from twisted.internet.defer import Deferred

from .core.cycle import CycleConfig
from .core.meta import KIND_NEW, META_CYCLE, META_KIND
from .core.plugins import ProbeSource
from .crawl_stats import stat_adder
from .cycle_planner import CyclePlanner
from .engine_link import EngineLink
from .frontier.base import CycleFrontier, Dupefilter
from .frontier.local import is_continuation
from .frontier.local import is_new as _is_new
from .history import (
    HistoryStore,
    HistoryStoreError,
    StoreLost,
    StoreRefused,
)
from .hubs import META_VIA, HubTally, hubs_for_crawler
from .plugins import Plugins, plugins_for_crawler
from .recrawl_queue import RecrawlQueue
from .runtime import close_refused, release_store, store_for_crawler
from .scope import not_a_page, off_reason
from .settings import RecrawlSettingError
from .startup import check_settings, enabled, startup_failure, watch_failed_close
from .stored_request import StoredRequests
from .traps import TrapCaps

logger = logging.getLogger(__name__)

#: the close reason of a crawl stopped because a request could not be queued (exit 1)
ENQUEUE_FAILED_REASON = "recrawl_enqueue_failed"  # in startup.FAILED_CLOSE_REASONS


def _is_start(meta: dict[str, Any]) -> bool:
    """A start request itself (its ``meta``), not its redirect or retry."""
    return (
        bool(meta.get("is_start_request"))
        and "redirect_urls" not in meta
        and "retry_times" not in meta
    )


class RecrawlScheduler(Scheduler):
    """Drop-in for Scrapy's scheduler that spends each cycle's budget on the
    recrawls most likely to find a change (see the module docstring)."""

    #: tells the history store that this scheduler starts the cycles
    manages_recrawl_cycles = True
    #: where the cycle lives (frontier/base.py): this process, or a shared Redis
    frontier_class: str = "scrapy_recrawl.frontier.local.LocalFrontier"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlScheduler:
        try:
            on = enabled(crawler.settings)
        except RecrawlSettingError as exc:
            raise startup_failure(exc) from None
        if not on:
            # RECRAWL_ENABLED = False: Scrapy's own scheduler, exactly
            return Scheduler.from_crawler(crawler)  # type: ignore[return-value]
        scheduler = super().from_crawler(crawler)
        scheduler._configure(crawler)
        return scheduler

    # -- set-up ------------------------------------------------------------

    def _configure(self, crawler: Crawler) -> None:
        try:
            check_settings(crawler.settings)  # once per crawl; the add-on may have done it
            self.config = CycleConfig.from_settings(crawler.settings)
            # the cycle's decision and record (cycle_planner.py): the scorer parsed now
            self.planner = CyclePlanner(crawler, self.config)
            # the URL-trap caps: known URLs per host, the frontier (traps.py)
            self.caps = TrapCaps(crawler.settings, crawler.stats)
        except RecrawlSettingError as exc:
            # Scrapy builds the scheduler while opening the spider, where a failure
            # is reported as "Engine slot not assigned": say what really failed, once.
            raise startup_failure(exc) from None
        self._fingerprinter: Any = None
        self._store: HistoryStore | None = None
        self._add_stat = stat_adder(self.stats)  # inc_stat's counting, a few per request
        # the papers' plug-ins (core/plugins.py), built when the store is open
        self.plugins = Plugins()
        self.prober: ProbeSource | None = None
        self._clock: Any = None  # continuous mode's periods: the reactor unless a test sets one
        self._enqueue_error = False  # a request could not be queued: said once, closing
        # the engine's part: quiet? next request now, closing the spider (engine_link.py)
        self.engine_link = EngineLink(crawler)
        # `scrapy shell`, `fetch`, `parse` ...: Scrapy's scheduler, no history, no cycle
        self.off = off_reason(crawler)
        if self.off is not None:
            return
        # what of a request is kept for its recrawls: as it leaves here (stored_request.py)
        self.stored_requests = StoredRequests.from_settings(crawler.settings)
        crawler.signals.connect(self.stored_requests.forget, signal=signals.response_received)
        self._hubs: HubTally = hubs_for_crawler(crawler)  # new URLs found by hub pages
        # the frontier reads its own settings now (a shared one reaches its server)
        try:
            self.frontier: CycleFrontier = load_object(self.frontier_class)(self)
        except (RecrawlSettingError, HistoryStoreError) as exc:
            raise startup_failure(exc, logged=True) from None  # the frontier said it
        # a frontier that holds no request back (the local one) leaves them to
        # enqueue_now: one call less for each of the spider's links
        holds = type(self.frontier).enqueue is not CycleFrontier.enqueue
        self._enqueue = self.frontier.enqueue if holds else self.enqueue_now

    @property
    def clock(self) -> Any:
        """The clock continuous mode keeps its periods on (Twisted's IReactorTime): the
        installed reactor, read when first needed; a test may set a
        ``twisted.internet.task.Clock`` before the scheduler opens."""
        if self._clock is None:
            from twisted.internet import reactor

            self._clock = reactor
        return self._clock

    @clock.setter
    def clock(self, value: Any) -> None:
        self._clock = value

    @property
    def settings(self) -> Any:
        assert self.crawler is not None
        return self.crawler.settings

    @property
    def fingerprinter(self) -> Any:
        # Not read in from_crawler: crawler.request_fingerprinter is only set once the
        # crawl starts, and Scrapy's scheduler can be built, opened and used from a
        # crawler that never starts one (Scrapy's own scheduler tests do): then build
        # the REQUEST_FINGERPRINTER_CLASS the crawl would use.
        if self._fingerprinter is None:
            assert self.crawler is not None
            try:
                self._fingerprinter = self.crawler.request_fingerprinter
            except RuntimeError:
                self._fingerprinter = build_from_crawler(
                    load_object(self.crawler.settings["REQUEST_FINGERPRINTER_CLASS"]),
                    self.crawler,
                )
        return self._fingerprinter

    # -- Scrapy's scheduler contract ----------------------------------------

    def open(self, spider: Spider) -> Deferred[None] | None:
        # Scrapy's own queues hold the continuations: redirects, retries, dont_filter
        result = super().open(spider)
        if self.off is not None:
            return result
        assert self.crawler is not None
        watch_failed_close(self.crawler)  # closed for an error or refused: scrapy crawl exits 1
        try:
            self._store = store_for_crawler(self.crawler, spider)
        except StoreRefused:
            self.off = "refused"  # said in the log; the spider closes once open (exit 1)
            return result
        except (HistoryStoreError, RecrawlSettingError) as exc:
            raise startup_failure(exc) from None
        self._open_plugins()
        self.planner.open(self.store, self.plugins)
        if self.config.continuous:
            self.crawler.signals.connect(self._on_idle, signal=signals.spider_idle)
            # a recrawl in flight is not scored again until it is back (frontier/local.py)
            self.crawler.signals.connect(
                self._left_downloader, signal=signals.request_left_downloader
            )
        try:
            self.frontier.open()
        except HistoryStoreError as exc:  # e.g. a shared cycle state that is not ours
            # one line, then the spider closes once open (exit 1), as a refused store does
            startup_failure(exc)
            self.off = "refused"
            self.crawler.signals.connect(close_refused, signal=signals.spider_opened)
        return result

    def close(self, reason: str) -> Deferred[None] | None:
        if self.off is not None:
            return super().close(reason)
        try:
            self.frontier.close(reason)
            return super().close(reason)
        finally:
            # Scrapy's contract: close() releases what open() took. The store and its
            # lock go now, not at engine_stopped: the next scheduler on the same JOBDIR
            # (Scrapy's own tests do it in one process) opens it again.
            if self._store is not None:
                assert self.crawler is not None
                release_store(self.crawler)

    def has_pending_requests(self) -> bool:
        if self.off is not None:
            return super().has_pending_requests()
        return (
            len(self.mqs) > 0
            or (self.dqs is not None and len(self.dqs) > 0)
            or self.frontier.has_pending()
            or self.frontier.probe_due()
        )

    def __len__(self) -> int:
        if self.off is not None:
            return super().__len__()
        return super().__len__() + self.frontier.queued()

    def enqueue_request(self, request: Request) -> bool:
        if self.off is not None:
            return super().enqueue_request(request)
        try:
            return self._enqueue(request)
        except StoreLost:
            return False  # said, and the spider closing, by the store's loss (epoch.py)
        except Exception as exc:  # noqa: BLE001 -- whatever it is, the link is not queued
            if request.meta.get("is_start_request"):
                # Scrapy's engine says this one itself ("Error while processing requests
                # from start()") and stops the crawl: its contract, which its own tests
                # check (tests/scrapy_suite); a link found later has nobody to say it
                raise
            self._enqueue_failed(request, exc)
            return False

    def _enqueue_failed(self, request: Request, exc: BaseException) -> None:
        """A request that could not be queued (a serializer, a full disk, a bug): the
        engine would log a traceback and crawl on without the link, and exit 0. Said in
        one line, and the spider closed (``recrawl_enqueue_failed``: exit status 1). A
        start request's failure is the engine's to say (:meth:`enqueue_request`)."""
        self.inc_stat("recrawl/enqueue_failed")
        if self._enqueue_error:
            return  # said once; the spider is closing
        self._enqueue_error = True
        logger.error(
            "recrawl: could not queue %s (%s: %s); closing the spider so no link is lost unnoticed",
            request.url,
            type(exc).__name__,
            exc,
        )
        logger.debug("recrawl: the queueing error's traceback", exc_info=exc)
        self.engine_link.close_spider(ENQUEUE_FAILED_REASON)

    def enqueue_now(self, request: Request) -> bool:
        """Enqueue ``request`` (the frontier calls it, or holds the request for later)."""
        if not_a_page(request) is not None:
            # bookkeeping (a sitemap, robots.txt, a POST, dont_recrawl): Scrapy's own
            # queues, as a continuation; never budgeted, never kept to recrawl
            return self._continuation(request)
        if is_continuation(request):  # not new (frontier/local.py: is_new)
            if _is_start(request.meta):
                why = self.frontier.start_taken(request)
                if why is not None:  # fetched once per cycle, by one process
                    self.inc_stat(f"recrawl/{why}")
                    return False
            return self._continuation(request)
        if not self._admit_new(request):
            return False
        self.inc_stat("recrawl/enqueued_new")
        self.frontier.push_new(request)
        return True

    def _dupefilter(self) -> Dupefilter:
        """The dupefilter of the cycle's requests: the frontier's own when it keeps one
        (a shared cycle's set in Redis), else Scrapy's (``DUPEFILTER_CLASS``)."""
        own = self.frontier.dupefilter
        return self.df if own is None else own

    def _continuation(self, request: Request) -> bool:
        """Into Scrapy's own queues, as its ``enqueue_request`` does, past the cycle's
        dupefilter (unless ``dont_filter``)."""
        df = self._dupefilter()
        if not request.dont_filter and df.request_seen(request):
            df.log(request, self.spider)
            return False
        self.push_scrapy(request)
        return True

    def _admit_new(self, request: Request) -> bool:
        """A spider request not seen before (dupefilter) for a URL the store does not know.

        A known URL is not fetched on the spider's say-so: the scorer decides.
        """
        df = self._dupefilter()
        if df.request_seen(request):
            df.log(request, self.spider)
            return False
        store = self._store
        assert store is not None, "the scheduler is not open"
        # the dupefilter's fingerprint, from Scrapy's cache of it (utils/request.py)
        if store.knows(self.fingerprint(request)):
            self.inc_stat("recrawl/known_skipped")
            return False
        if not self.caps.admit(request, store):
            return False  # its host is full (RECRAWL_MAX_URLS_PER_HOST): counted, said
        via = request.meta.pop(META_VIA, None)
        if via is not None:  # a new URL found on a refetched page: a hub's (hubs.py)
            self._hubs.found(int(via))
        return True

    def next_request(self) -> Request | None:
        if self.off is not None:
            return super().next_request()
        # continuations first, never budgeted; each URL once per cycle all the same
        while (request := super().next_request()) is not None:
            if not self.frontier.first_fetch(request):
                continue
            if self.frontier.unbudgeted() and _is_new(request):
                request.meta[META_CYCLE] = self.frontier.cycle
                request.meta[META_KIND] = KIND_NEW
                self.inc_stat("recrawl/fetched_new")
            break
        else:
            request = self.frontier.next_request()
        if request is not None:
            # the request as the spider made it, before the downloader middlewares:
            # what its recrawls are rebuilt from (stored_request.py)
            self.stored_requests.mark(request)
        return request

    # -- what the frontier uses of the scheduler (frontier/base.py: SchedulerHost) --

    def push_scrapy(self, request: Request) -> None:
        # what Scheduler.enqueue_request() does past the dupefilter, already asked
        inc = self.inc_stat
        if self._dqpush(request):
            inc("scheduler/enqueued/disk")
        else:
            self._mqpush(request)
            inc("scheduler/enqueued/memory")
        inc("scheduler/enqueued")

    def mark_seen(self, request: Request) -> None:
        self._dupefilter().request_seen(request)

    def new_url_queue(self) -> Any:
        assert self.crawler is not None and self.pqclass is not None
        # memory only: over-budget and leftover new requests persist in the store's frontier
        return build_from_crawler(
            self.pqclass,
            self.crawler,
            downstream_queue_cls=self.mqclass,
            key="",
            start_queue_cls=None,
        )

    def recrawl_queue(self) -> RecrawlQueue:
        assert self.crawler is not None
        return RecrawlQueue(self.crawler)

    def drain_memory_queue(self) -> list[Request]:
        return list(iter(self.mqs.pop, None))

    def job_file(self, name: str) -> str | None:
        return os.path.join(self.dqdir, name) if self.dqdir else None

    def fingerprint(self, request: Request) -> bytes:
        fingerprinter = self._fingerprinter
        if fingerprinter is None:
            fingerprinter = self.fingerprinter
        return fingerprinter.fingerprint(request)  # type: ignore[no-any-return]

    def dropped(self, request: Request) -> None:
        assert self.crawler is not None
        self.crawler.signals.send_catch_log(
            signals.request_dropped, request=request, spider=self.spider
        )

    def continuations(self) -> int:
        """Requests in Scrapy's own queues (start requests, redirects, retries)."""
        return super().__len__()

    def rebuild_request(self, d: dict[str, Any] | None, url_id: int) -> Request:
        """The stored request of ``url_id``, or a plain GET of its URL (to the spider's
        parse) when there is none or it cannot be rebuilt."""
        if d is not None:
            try:
                return self.stored_requests.rebuild(d, self.spider)
            except (ValueError, TypeError, AttributeError) as exc:
                logger.warning(
                    "recrawl: cannot rebuild the stored request %r: %s", d.get("url"), exc
                )
        return Request(self.store.urls(np.asarray([url_id], dtype=np.int64))[0])

    def request_from_frontier(self, d: dict[str, Any]) -> Request | None:
        try:
            request = request_from_dict(d, spider=self.spider)
        except (ValueError, TypeError, AttributeError) as exc:
            logger.warning("recrawl: dropping frontier request %r: %s", d.get("url"), exc)
            return None
        if self.store.knows(self.fingerprint(request)):
            return None  # fetched since it was kept: its recrawl is the scorer's decision
        # Marked seen, so the spider's own link to it is a duplicate, but never dropped
        # for having been seen: a JOBDIR dupefilter (requests.seen) already holds every
        # request this job enqueued, frontier ones included, and Scrapy's scheduler
        # does not filter its persisted pending requests a second time on resume.
        self.mark_seen(request)
        return request

    def inc_stat(self, key: str, count: int = 1) -> None:
        self._add_stat(key, count)

    def set_stat(self, key: str, value: Any) -> None:
        if self.stats is not None:
            self.stats.set_value(key, value)

    # -- cycles ----------------------------------------------------------------

    @property
    def store(self) -> HistoryStore:
        assert self._store is not None, "the scheduler is not open"
        return self._store

    def _open_plugins(self) -> None:
        """Build the plug-ins this crawl needs (once per crawler, shared with the middleware)."""
        assert self.crawler is not None
        try:
            self.plugins = plugins_for_crawler(
                self.crawler, self.store, self.planner.scorer.terminals_needed
            )
            if self.plugins.probe_source is not None and not self.frontier.supports_probes:
                raise RecrawlSettingError(
                    "loop-time probes (RECRAWL_PROBE, the `due` terminal) need a scheduler "
                    f"whose cycle lives in this process: {type(self).__name__} does not run "
                    "them yet (docs/baskets.md)"
                )
        except RecrawlSettingError as exc:
            raise startup_failure(exc) from None
        self.prober = self.plugins.probe_source

    def _left_downloader(self, request: Request, spider: Spider) -> None:
        self.frontier.request_left(request)

    def _on_idle(self, spider: Spider) -> None:
        if (
            self.config.max_cycles
            and self.frontier.cycles_run >= self.config.max_cycles
            and not self.has_pending_requests()
        ):
            return  # let the spider close
        # the cycle's work may be over: summed up, and the next one opens at the start of
        # the next period (a timer wakes the engine then; nothing polls in between). A
        # store away or lost meanwhile is the frontier's to handle: nothing may leave
        # this signal handler (Scrapy logs it with a traceback, may close "finished")
        self.frontier.maybe_roll_over(check_work=True)
        raise DontCloseSpider
