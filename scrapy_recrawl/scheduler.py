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
the spider's say-so: its recrawl is the scorer's decision.

In a per-run cycle with no budget (the warm-up cycles) there is nothing to
count, so new URLs share Scrapy's own queues: request order, priorities and
JOBDIR persistence are then exactly Scrapy's scheduler's (docs/scheduler.md:
Scrapy's own scheduler, engine and crawl tests pass against this class).

Cycles: one ``scrapy crawl`` is one cycle (cron-style), or, with
``RECRAWL_CONTINUOUS``, the spider stays open and a cycle ends when its budget
is handed out or ``RECRAWL_CYCLE_SECONDS`` have passed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import numpy as np
from scrapy import Request, Spider, signals
from scrapy.core.scheduler import Scheduler
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import request_from_dict
from twisted.internet.defer import Deferred

from .core.budget import Budget
from .core.cycle import CycleConfig, CyclePlan, cycle_over, plan_cycle, side_order
from .core.meta import META_CYCLE, META_ID, META_RANK, META_SCORE
from .core.plugins import ProbeSource
from .history import HistoryStore, store_for_crawler
from .plugins import Plugins, plugins_for_crawler, scorer_for_crawler
from .recrawl_queue import RecrawlQueue
from .settings import RecrawlSettingError

logger = logging.getLogger(__name__)


_CONTINUATION_META = ("redirect_urls", "retry_times", "is_start_request")


_RETRY_META = ("redirect_urls", "retry_times")


def _is_start(request: Request) -> bool:
    """A start request itself, not its redirect or retry."""
    return bool(request.meta.get("is_start_request")) and not any(
        k in request.meta for k in _RETRY_META
    )


def _is_new(request: Request) -> bool:
    """Not a continuation (start request, redirect, retry, ``dont_filter``)."""
    return not request.dont_filter and not any(k in request.meta for k in _CONTINUATION_META)


class RecrawlScheduler(Scheduler):
    """Drop-in for Scrapy's scheduler that spends each cycle's budget on the
    recrawls most likely to find a change (see the module docstring)."""

    #: tells the history store that this scheduler starts the cycles
    manages_recrawl_cycles = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlScheduler:
        scheduler = super().from_crawler(crawler)
        scheduler._configure(crawler)
        return scheduler

    # -- set-up ------------------------------------------------------------

    def _configure(self, crawler: Crawler) -> None:
        try:
            self.config = CycleConfig.from_settings(crawler.settings)
            # Parsed now: a bad RECRAWL_SCORER stops the crawl before it starts.
            self.scorer = scorer_for_crawler(crawler)
        except RecrawlSettingError as exc:
            # Scrapy builds the scheduler while opening the spider, where a failure
            # is reported as "Engine slot not assigned": say what really failed.
            logger.error("recrawl: %s", exc)
            raise
        self._fingerprinter: Any = None
        self._recrawls: RecrawlQueue = RecrawlQueue(crawler)
        self._store: HistoryStore | None = None
        self._cycles_run = 0
        self._selected: np.ndarray = np.zeros(0, dtype=np.int64)  # this cycle's ids, by rank
        self._in_flight: set[int] = set()  # recrawl ids handed out, not yet downloaded
        # the papers' plug-ins (core/plugins.py), built when the store is open
        self.plugins = Plugins()
        self.prober: ProbeSource | None = None
        # this cycle's recrawls, by fingerprint: a start request for one of them is dropped
        self._recrawl_fps: set[bytes] = set()
        self.taken_probe = 0
        self._probe_cap: int | None = None
        self._wake_call: Any = None

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
        result = super().open(spider)
        assert self.crawler is not None
        self.newqs = self._new_queue()
        self._store = store_for_crawler(self.crawler)
        self._open_plugins()
        if self.config.continuous:
            self.crawler.signals.connect(self._on_idle, signal=signals.spider_idle)
            self.crawler.signals.connect(
                self._left_downloader, signal=signals.request_left_downloader
            )
        if not self._resume_cycle():
            self._start_cycle()
        return result

    def close(self, reason: str) -> Deferred[None] | None:
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        self._save_cycle_state(reason)
        self._spill_new_to_frontier()
        self.store.flush()
        return super().close(reason)

    def has_pending_requests(self) -> bool:
        return (
            len(self.mqs) > 0
            or (self.dqs is not None and len(self.dqs) > 0)
            or (self._budget_left() and (len(self._recrawls) > 0 or len(self.newqs) > 0))
            or self._probe_due()
        )

    def __len__(self) -> int:
        return super().__len__() + len(self._recrawls) + len(self.newqs)

    def enqueue_request(self, request: Request) -> bool:
        if _is_start(request) and self.fingerprinter.fingerprint(request) in self._recrawl_fps:
            # its recrawl is queued this cycle: each URL at most once per cycle
            self._inc("recrawl/start_is_recrawl")
            return False
        if not _is_new(request):
            return super().enqueue_request(request)
        if not self._admit_new(request):
            return False
        self._inc("recrawl/enqueued_new")
        if self._unbudgeted_run():
            # Nothing to count: share Scrapy's own queues, so priorities, start-request
            # order and JOBDIR disk queues are exactly Scrapy's (its engine tests check
            # that a priority-1 callback request goes before priority-0 start requests,
            # which a separate new-URL queue behind the continuations would break).
            # What super().enqueue_request() does past the dupefilter, already asked above:
            if self._dqpush(request):
                self._inc("scheduler/enqueued/disk")
            else:
                self._mqpush(request)
                self._inc("scheduler/enqueued/memory")
            self._inc("scheduler/enqueued")
            return True
        self.newqs.push(request)
        self._inc("scheduler/enqueued")
        return True

    def _admit_new(self, request: Request) -> bool:
        """A spider request not seen before (dupefilter) for a URL the store does not know.

        A known URL is not fetched on the spider's say-so: the scorer decides.
        """
        if self.df.request_seen(request):
            self.df.log(request, self.spider)
            return False
        if self.store.knows(self.fingerprinter.fingerprint(request)):
            self._inc("recrawl/known_skipped")
            return False
        return True

    def next_request(self) -> Request | None:
        request = super().next_request()  # continuations first, never budgeted
        if request is not None:
            if self._unbudgeted_run() and _is_new(request):
                request.meta[META_CYCLE] = self.store.cycle
                self._inc("recrawl/fetched_new")
            return request
        if self.config.continuous:
            self._maybe_roll_over()
        if not self._budget_left():
            return None
        request = self._next_probe()  # loop-time baskets: due probes go first
        if request is None:
            request = self._next_budgeted()
        if request is not None:
            self._inc("scheduler/dequeued")
        return request

    # -- the budgeted streams ------------------------------------------------

    def _next_budgeted(self) -> Request | None:
        order = side_order(self.budget, self.taken_new, self.taken_recrawl, quiet=self._quiet)
        for side, _quota in order:
            if side == "recrawl" and len(self._recrawls):
                self.taken_recrawl += 1
                request = self._recrawls.pop()
                if self.config.continuous and request is not None:
                    self._in_flight.add(request.meta[META_ID])
                return request
            if side == "new" and len(self.newqs):
                request = self.newqs.pop()
                if request is not None:
                    self.taken_new += 1
                    request.meta[META_CYCLE] = self.store.cycle
                    self._inc("recrawl/fetched_new")
                return request
        return None  # wait: responses in flight may still bring new URLs

    def _quiet(self) -> bool:
        """Nothing downloading, scraping or left in start(): no new URL can turn up."""
        try:
            engine = self.crawler.engine  # type: ignore[union-attr]
        except (AttributeError, RuntimeError):  # Scrapy 2.19 raises before the crawl starts
            return True
        downloader = getattr(engine, "downloader", None)
        scraper = getattr(engine, "scraper", None)
        return (
            not getattr(downloader, "active", None)
            and (scraper is None or scraper.slot is None or scraper.slot.is_idle())
            and getattr(engine, "_start", None) is None
        )

    def _unbudgeted_run(self) -> bool:
        """A per-run cycle with no budget (warm-up): new URLs need no queue of their own.

        Not in continuous mode, where a later cycle of the same run has a budget and
        requests already in Scrapy's queues would escape it.
        """
        return self.budget.total is None and not self.config.continuous

    def _budget_left(self) -> bool:
        total = self.budget.total
        # taken_probe: probes of new URLs (loop-time baskets) count against the budget too
        return total is None or self.taken_new + self.taken_recrawl + self.taken_probe < total

    # -- loop-time baskets: probes of new URLs (estimate/probes.py, docs/baskets.md) --

    def _probe_due(self) -> bool:
        if self.prober is None or not self.prober.has_due():
            return False
        return self._budget_left() and (
            self._probe_cap is None or self.taken_probe < self._probe_cap
        )

    def _next_probe(self) -> Request | None:
        prober = self.prober
        if prober is None:
            return None
        if self._probe_cap is not None and self.taken_probe >= self._probe_cap:
            return None
        url_id = prober.pop_due()
        if url_id is None:
            self._wake_at(prober.next_due_time())
            return None
        ids = np.asarray([url_id], dtype=np.int64)
        request = self._rebuild(self.store.requests(ids)[0], ids)
        request.meta[META_CYCLE] = self.store.cycle
        prober.dispatched(self.fingerprinter.fingerprint(request), url_id)
        self.taken_probe += 1
        return request

    def _rebuild(self, d: dict[str, Any] | None, ids: np.ndarray) -> Request:
        """The stored request of ``ids[0]``, or a plain GET of its URL when unusable."""
        if d is not None:
            try:
                return request_from_dict(d, spider=self.spider)
            except (ValueError, TypeError, AttributeError):
                pass
        return Request(self.store.urls(ids)[0])

    def _wake_at(self, when: float | None) -> None:
        """Nudge the engine when the next probe comes due (its idle heartbeat is 5 s)."""
        if when is None or (self._wake_call is not None and self._wake_call.active()):
            return
        from twisted.internet import reactor

        def wake() -> None:
            slot = getattr(getattr(self.crawler, "engine", None), "_slot", None)
            if slot is not None:
                slot.nextcall.schedule()

        clock: Any = reactor  # the installed reactor (typed as the module)
        self._wake_call = clock.callLater(max(0.0, when - time.time()) + 0.01, wake)

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
                self.crawler, self.store, self.scorer.terminals_needed
            )
        except RecrawlSettingError as exc:
            logger.error("recrawl: %s", exc)
            raise
        self.prober = self.plugins.probe_source

    def _plan_cycle(self, exclude: np.ndarray | None = None) -> CyclePlan:
        """Start the next cycle in the store and let the cycle core decide it.

        Shared by every scheduler (the Redis one runs it once, under its lock).
        """
        store = self.store
        store.advance_cycle()
        return plan_cycle(
            store.arrays(),
            self.config,
            self.scorer,
            pending_new=store.frontier_size(),
            exclude=exclude,
            urls_of=store.urls,
            providers=self.plugins.column_providers,
            selector=self.plugins.selector,
        )

    def _cycle_stats(self, plan: CyclePlan, scheduled: int) -> None:
        stats = self.crawler.stats if self.crawler else None
        if stats is not None:
            stats.set_value("recrawl/cycle", plan.cycle)
            stats.inc_value("recrawl/scheduled", scheduled)
            stats.set_value("recrawl/scored_urls", plan.selection.scored)
            stats.inc_value("recrawl/score_seconds", plan.score_seconds)  # type: ignore[arg-type]
            stats.inc_value("recrawl/monitored", plan.selection.monitored)
        logger.info(
            "recrawl cycle %d: %s; scored %d known URLs with %s in %.2fs, %d recrawls queued "
            "(%d monitored), %d new URLs from the frontier",
            plan.cycle,
            "warm-up, no budget" if plan.warmup else f"budget {plan.budget.total} pages",
            plan.selection.scored,
            self.scorer,
            plan.score_seconds,
            scheduled,
            plan.selection.monitored,
            plan.new_quota,
        )

    def _start_cycle(self) -> None:
        # still downloading from the last cycle: their visit is not recorded yet
        in_flight = np.fromiter(self._in_flight, dtype=np.int64, count=len(self._in_flight))
        plan = self._plan_cycle(exclude=in_flight)
        self._cycles_run += 1
        self.cycle_started = time.monotonic()
        self.budget = plan.budget
        self._selected = plan.selection.ids
        self._recrawl_fps = set()
        self._queue_recrawls(plan.selection.ids, plan.selection.scores, plan.cycle)
        self.taken_new = 0
        self.taken_recrawl = 0
        self.taken_probe = 0
        self._probe_cap = None if self.prober is None else self.prober.cap(plan.budget.total)
        for d in self.store.pop_frontier(plan.new_quota):
            self._push_new(d)
        self._cycle_stats(plan, len(plan.selection.ids))

    def _queue_recrawls(self, ids: np.ndarray, scores: np.ndarray, cycle: int) -> None:
        urls_needed = []
        dicts = self.store.requests(ids)
        for rank, (url_id, d) in enumerate(zip(ids.tolist(), dicts, strict=True)):
            if d is None:
                urls_needed.append((rank, url_id))
                continue
            try:
                request = request_from_dict(d, spider=self.spider)
            except (ValueError, TypeError, AttributeError) as exc:
                logger.warning(
                    "recrawl: cannot rebuild the stored request %r: %s", d.get("url"), exc
                )
                urls_needed.append((rank, url_id))
                continue
            self._push_recrawl(rank, request, float(scores[rank]), cycle)
        if urls_needed:  # no usable stored request: re-issue a plain GET to the spider's parse
            urls = self.store.urls(np.asarray([i for _, i in urls_needed]))
            for (rank, _), url in zip(urls_needed, urls, strict=True):
                self._push_recrawl(rank, Request(url), float(scores[rank]), cycle)

    def _push_recrawl(self, rank: int, request: Request, score: float, cycle: int) -> None:
        request.meta[META_CYCLE] = cycle
        request.meta[META_ID] = int(self._selected[rank])
        request.meta[META_RANK] = rank
        request.meta[META_SCORE] = score
        self._recrawl_fps.add(self.fingerprinter.fingerprint(request))
        self.df.request_seen(request)  # the spider's own link to it is then a duplicate
        self._recrawls.push(rank, request)

    def _push_new(self, d: dict[str, Any]) -> None:
        try:
            request = request_from_dict(d, spider=self.spider)
        except (ValueError, TypeError, AttributeError) as exc:
            logger.warning("recrawl: dropping frontier request %r: %s", d.get("url"), exc)
            return
        if self.store.knows(self.fingerprinter.fingerprint(request)):
            return  # fetched since it was kept: its recrawl is the scorer's decision
        # Marked seen, so the spider's own link to it is a duplicate, but never dropped
        # for having been seen: a JOBDIR dupefilter (requests.seen) already holds every
        # request this job enqueued, frontier ones included, and Scrapy's scheduler
        # does not filter its persisted pending requests a second time on resume.
        self.df.request_seen(request)
        self.newqs.push(request)

    def _cycle_over(self) -> bool:
        """Continuous mode: the budget is spent or the cycle's time is up, and cycles remain."""
        return cycle_over(
            self.config,
            budget_left=self._budget_left(),
            elapsed=time.monotonic() - self.cycle_started,
            cycles_run=self._cycles_run,
        )

    def _maybe_roll_over(self) -> None:
        if not self._cycle_over():
            return
        self._recrawls.drain()  # unfetched recrawls are rescored with the rest
        self._start_cycle()

    def _left_downloader(self, request: Request, spider: Spider) -> None:
        self._in_flight.discard(request.meta.get(META_ID, -1))

    def _on_idle(self, spider: Spider) -> None:
        if (
            self.config.max_cycles
            and self._cycles_run >= self.config.max_cycles
            and not self.has_pending_requests()
        ):
            return  # let the spider close
        self._maybe_roll_over()
        raise DontCloseSpider

    # -- persistence -----------------------------------------------------------

    def _new_queue(self) -> Any:
        assert self.crawler is not None and self.pqclass is not None
        # memory only: over-budget and leftover new requests persist in the store's frontier
        return build_from_crawler(
            self.pqclass,
            self.crawler,
            downstream_queue_cls=self.mqclass,
            key="",
            start_queue_cls=None,
        )

    def _spill_new_to_frontier(self) -> None:
        items = []
        pending = [self.newqs]
        if self._unbudgeted_run():
            # New URLs shared Scrapy's memory queue (JOBDIR's disk queue keeps its own).
            pending.append(self.mqs)
        for request in (r for q in pending for r in iter(q.pop, None)):
            if not _is_new(request):
                continue  # a continuation: dropped with the memory queue, as in Scrapy
            try:
                d = request.to_dict(spider=self.spider)
            except ValueError:
                self._inc("recrawl/frontier_unserializable")
                continue
            items.append((self.fingerprinter.fingerprint(request), d, request.priority))
        if items:
            added = self.store.push_frontier(items)
            self._inc("recrawl/frontier_saved", added)

    def _state_path(self) -> str | None:
        return os.path.join(self.dqdir, "recrawl_cycle.json") if self.dqdir else None

    def _save_cycle_state(self, reason: str) -> None:
        """With JOBDIR, remember an interrupted cycle so a resume finishes it."""
        path = self._state_path()
        if path is None:
            return
        left = [r.meta.get(META_RANK) for r in self._recrawls.drain()]
        state = {
            "cycle": self.store.cycle,
            "finished": reason == "finished",
            "taken_new": self.taken_new,
            "taken_recrawl": self.taken_recrawl,
            "budget": [self.budget.total, self.budget.new],
            "left_ids": [int(self._selected[i]) for i in left if i is not None],
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(state, fh)

    def _resume_cycle(self) -> bool:
        path = self._state_path()
        if path is None or not os.path.exists(path):
            return False
        with open(path, encoding="utf-8") as fh:
            state = json.load(fh)
        os.remove(path)
        if state.get("finished") or state.get("cycle") != self.store.cycle:
            return False
        self.budget = Budget(*state["budget"])
        self.taken_new, self.taken_recrawl = state["taken_new"], state["taken_recrawl"]
        self._probe_cap = None if self.prober is None else self.prober.cap(self.budget.total)
        self.cycle_started = time.monotonic()
        self._cycles_run += 1
        ids = np.asarray(state["left_ids"], dtype=np.int64)
        self._selected = ids
        self._recrawl_fps = set()
        self._queue_recrawls(ids, np.zeros(len(ids)), self.store.cycle)
        # The new requests pending when the job stopped were kept in the frontier
        # (close() spills them there): take them back, as Scrapy's scheduler takes its
        # pending requests back from JOBDIR, up to what is left of the budget.
        pending = self.store.frontier_size()
        if self.budget.total is not None:
            pending = min(pending, max(0, self.budget.total - self.taken_new - self.taken_recrawl))
        for d in self.store.pop_frontier(pending):
            self._push_new(d)
        logger.info(
            "recrawl cycle %d resumed from JOBDIR: %d recrawls and %d new URLs left",
            self.store.cycle,
            len(ids),
            len(self.newqs),
        )
        return True

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, count)
