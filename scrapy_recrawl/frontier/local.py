"""The cycle of one ``scrapy crawl``: kept in this process, resumed from JOBDIR.

Recrawls wait in a :class:`~scrapy_recrawl.recrawl_queue.RecrawlQueue` (score
order per download slot), new URLs in a Scrapy priority queue of their own;
new URLs the cycle has no budget for, and those left when the spider closes,
wait in the store's frontier for a later cycle. With JOBDIR, an interrupted
cycle is written to ``recrawl_cycle.json`` (with the URLs it has fetched, so a
resume fetches none of them again) and the next run finishes it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from typing import Any

import numpy as np
from scrapy import Request

from ..core.budget import Budget
from ..core.meta import META_CYCLE, META_ID, META_KIND, META_RANK, META_SCORE
from ..history import HistoryStoreError, StoreLost
from ..history.base import ReadAheadStore, fenced, read_ahead
from ..scope import not_a_page
from ..settings import get
from .base import CycleFrontier, LocalHost, RequestQueue, Taken, recrawl_kind
from .outage import Outage
from .probes import ProbeDispatch

#: recrawls whose records the store reads in one go (a block: far below the SQLite
#: store's cache of 1,024 records, and above the requests a crawl keeps in flight)
_READ_AHEAD = 64

logger = logging.getLogger("scrapy_recrawl.scheduler")


def is_continuation(request: Request) -> bool:
    """A start request, a redirect's or a retry's copy, or ``dont_filter``: Scrapy's
    to queue, never a new URL (whether it is a page of the spider's or not)."""
    if request.dont_filter:
        return True
    meta = request.meta  # asked of every link the spider yields: no generator per call
    return "redirect_urls" in meta or "retry_times" in meta or "is_start_request" in meta


def is_new(request: Request) -> bool:
    """A page of the spider's (scope.not_a_page), not a continuation (start request,
    redirect, retry, ``dont_filter``)."""
    return not is_continuation(request) and not_a_page(request) is None


class LocalFrontier(CycleFrontier):
    """One process's cycle (module docstring)."""

    host: LocalHost

    def __init__(self, host: LocalHost) -> None:
        super().__init__(host)
        self.recrawls = host.recrawl_queue()
        self.newqs: RequestQueue | None = None
        # new URLs waiting from earlier cycles (the store's frontier, its order: priority,
        # then oldest first): taken before this cycle's finds, so none waits for ever
        self.backlog: deque[Request] = deque()
        self.taken_new = 0
        self.taken_recrawl = 0
        self.taken_probe = 0
        self.selected: np.ndarray = np.zeros(0, dtype=np.int64)  # this cycle's ids, by rank
        self.in_flight: set[int] = set()  # recrawl ids handed out, not yet downloaded
        # this cycle's recrawls, by fingerprint: a start request for one of them is dropped
        self.recrawl_fps: set[bytes] = set()
        # URLs handed out this cycle, by fingerprint: when, and whether only by the
        # spider's own dont_filter requests (frontier/base.py: first_fetch)
        self.fetched: dict[bytes, tuple[float, bool]] = {}
        self.probe_cap: int | None = None
        self.probes: ProbeDispatch | None = None  # loop-time probes, with a probe source
        # a shared history store away as the cycle rolls over (maybe_roll_over)
        self._outage: Outage | None = None
        self._retry_call: Any = None
        # the store reading a block of recrawls ahead of their visits (_read_ahead)
        self._reader: ReadAheadStore | None = None
        self._blocks_read: set[int] = set()  # blocks of ranks read ahead this cycle

    # -- life ------------------------------------------------------------------

    def open(self) -> None:
        self.newqs = self.host.new_url_queue()
        prober = self.host.prober  # the plug-ins are built: the scheduler is open
        self.probes = None if prober is None else ProbeDispatch(self.host, self, prober)
        if not self._resume():
            self.start_cycle()

    def close(self, reason: str) -> None:
        self.cancel_wake()
        if self.probes is not None:
            self.probes.cancel()
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        self._save(reason)
        self.summarize_cycle()
        # a continuation is dropped with the memory queue, as in Scrapy
        self.keep_for_later([r for r in self._pending_new() if is_new(r)])
        try:
            self.host.store.flush()
        except HistoryStoreError:
            pass  # kept, retried once more when the store closes, and said there if lost

    # -- requests in ---------------------------------------------------------------

    def start_taken(self, request: Request) -> str | None:
        if self.host.fingerprint(request) in self.recrawl_fps:
            return "start_is_recrawl"  # its recrawl is queued this cycle
        return None

    def push_new(self, request: Request) -> None:
        if self.unbudgeted():
            # Nothing to count: share Scrapy's own queues, so priorities, start-request
            # order and JOBDIR disk queues are exactly Scrapy's (its engine tests check
            # that a priority-1 callback request goes before priority-0 start requests,
            # which a separate new-URL queue behind the continuations would break).
            self.host.push_scrapy(request)
            return
        newqs = self.newqs
        assert newqs is not None, "the frontier is not open"
        newqs.push(request)
        self.host.inc_stat("scheduler/enqueued")

    # -- requests out ----------------------------------------------------------------

    def take(self, side: str, quota: int | None) -> Request | None:
        if side == "recrawl":
            if not len(self.recrawls):
                return None
            request = self.recrawls.pop()
            self.taken_recrawl += 1
            if self._reader is not None and request is not None:
                self._read_ahead(request.meta.get(META_RANK))
            if self.host.config.continuous and request is not None:
                self.in_flight.add(request.meta[META_ID])
            return request
        if self.backlog:
            request = self.backlog.popleft()
        elif self.newqs is None or not len(self.newqs):
            return None
        else:
            request = self.newqs.pop()
        if request is not None:
            self.taken_new += 1
        return request

    def give_back(self, side: str, request: Request) -> None:
        if side == "recrawl":
            self.taken_recrawl -= 1
            self.in_flight.discard(request.meta.get(META_ID, -1))
        else:
            self.taken_new -= 1

    def mark_fetched(self, fingerprint: bytes, spider: bool, due: float | None) -> bool:
        before = self.fetched.get(fingerprint)
        if before is not None:
            at, by_spider = before
            if not (by_spider if spider else due is not None and at < due):
                return False
            spider = spider and by_spider
        self.fetched[fingerprint] = (time.time(), spider)  # wall time, as the probes' due
        return True

    def taken(self) -> Taken:
        return Taken(self.taken_new, self.taken_recrawl, self.taken_probe)

    def unbudgeted(self) -> bool:
        """A per-run cycle with no budget (warm-up): new URLs need no queue of their own.

        Not in continuous mode, where a later cycle of the same run has a budget and
        requests already in Scrapy's queues would escape it.
        """
        return self.budget.total is None and not self.host.config.continuous

    def queued(self) -> int:
        return (
            len(self.recrawls)
            + len(self.backlog)
            + (len(self.newqs) if self.newqs is not None else 0)
        )

    def waiting_new(self) -> int:
        """New URLs queued in this process and not handed out: the backlog a cycle
        leaves for later cycles, with the store's frontier (cycle_summary.py)."""
        return len(self.backlog) + (len(self.newqs) if self.newqs is not None else 0)

    # -- probes (loop-time baskets) count against the budget -------------------------

    def next_probe(self) -> Request | None:
        return None if self.probes is None else self.probes.next()

    def probe_due(self) -> bool:
        return self.probes is not None and self.probes.due()

    def probe_allowed(self) -> bool:
        return self.probe_cap is None or self.taken_probe < self.probe_cap

    def probe_taken(self) -> None:
        self.taken_probe += 1

    # -- cycles ------------------------------------------------------------------------

    def start_cycle(self, period_start: float | None = None) -> None:
        """Open the next cycle (continuous mode: in the period starting at
        ``period_start``; None: now)."""
        # still downloading from the last cycle: their visit is not recorded yet
        in_flight = np.fromiter(self.in_flight, dtype=np.int64, count=len(self.in_flight))
        plan = self.host.planner.plan_cycle(exclude=in_flight)
        self.cycles_run += 1
        self.started = self.monotonic()
        self.opened(period_start)
        self.cycle = plan.cycle
        self.budget = plan.budget
        self.selected = plan.selection.ids
        self.recrawl_fps = set()
        self.fetched = {}
        self._queue_recrawls(plan.selection.ids, plan.selection.scores)
        self.taken_new = self.taken_recrawl = self.taken_probe = 0
        self._reset_probe_cap()
        for d in self.host.store.pop_frontier(plan.new_quota):
            self._queue_from_frontier(d)
        self.host.planner.log_cycle(plan, len(plan.selection.ids))

    def roll_over(self, period_start: float) -> None:
        self.drop_queued_recrawls()
        self.summarize_cycle()  # once: done already when the cycle's work ended first
        self.start_cycle(period_start)
        if self._outage is not None:
            self._outage.ok()  # the store answered the whole roll-over: an outage is over

    def maybe_roll_over(self, *, check_work: bool = True) -> None:
        """As every frontier does (frontier/base.py); a shared history store (a Redis) that
        does not answer meanwhile is waited for, as RedisRecrawlScheduler waits for its
        Redis (``RECRAWL_REDIS_OUTAGE_SECONDS``, frontier/outage.py): the roll-over is
        tried again each second, and past the limit the spider closes
        (``recrawl_redis_unavailable``, exit 1). A store lost is said once by the store
        (history/epoch.py) and the spider is closing. Either way no error leaves the
        scheduler's spider_idle handler, where Scrapy would log it with a traceback and
        close the spider "finished"."""
        try:
            super().maybe_roll_over(check_work=check_work)
        except StoreLost:
            pass
        except HistoryStoreError as exc:
            if fenced(self.host.store) is None:
                raise  # a store in this process (SQLite): nothing comes back by waiting
            self._store_away(exc)

    def _store_away(self, exc: HistoryStoreError) -> None:
        if self._outage is None:
            self._outage = Outage(
                self.host,
                self.host.store.location,
                get(self.host.settings, "RECRAWL_REDIS_OUTAGE_SECONDS"),
            )
        # waited out (the roll-over tried again each second), or the spider closing
        if self._outage.failed(exc) and (self._retry_call is None or not self._retry_call.active()):
            self._retry_call = self.host.clock.callLater(1.0, self.host.engine_link.wake)

    def drop_queued_recrawls(self) -> None:
        self.recrawls.drain()  # unfetched recrawls are rescored with the rest
        # new URLs not fetched: the next cycle's backlog, through the store's frontier
        # (its order, and the count the next cycle's new share grows with)
        self.keep_for_later([r for r in self._pending_new() if is_new(r)])

    def _reset_probe_cap(self) -> None:
        prober = self.host.prober
        self.probe_cap = None if prober is None else prober.cap(self.budget.total)

    def _read_ahead(self, rank: int | None) -> None:
        """Have the store read this cycle's recrawls by blocks of ranks, each block once:
        the block of the recrawl of ``rank`` as it is handed out, and the next one from
        the middle of a block on (history/base.py: ReadAheadStore). By block, not by how
        far the ranks handed out have got: recrawls leave per download slot, so a busy
        host's come out of rank order."""
        if rank is None:
            return
        block = rank // _READ_AHEAD
        wanted = (block, block + 1) if rank % _READ_AHEAD >= _READ_AHEAD // 2 else (block,)
        assert self._reader is not None
        for b in wanted:
            if b in self._blocks_read:
                continue
            self._blocks_read.add(b)
            ids = self.selected[b * _READ_AHEAD : (b + 1) * _READ_AHEAD]
            if not len(ids):
                continue
            try:
                self._reader.read_ahead(ids)
            except HistoryStoreError:
                return  # a hint: each visit reads its own record, and says what failed

    def _queue_recrawls(self, ids: np.ndarray, scores: np.ndarray) -> None:
        host, cycle = self.host, self.cycle
        # read ahead of their visits by blocks of ``selected`` (_read_ahead)
        self._reader = read_ahead(host.store)
        self._blocks_read = set()
        stored = host.store.requests(ids)
        # Python ints and floats once, not a numpy scalar per use (a cycle's thousands)
        for rank, (d, url_id, score) in enumerate(
            zip(stored, ids.tolist(), scores.tolist(), strict=False)
        ):
            request = host.rebuild_request(d, url_id)
            meta = request.meta
            meta[META_CYCLE] = cycle
            meta[META_ID] = url_id
            meta[META_RANK] = rank
            meta[META_SCORE] = score
            meta[META_KIND] = recrawl_kind(score)
            self.recrawl_fps.add(host.fingerprint(request))
            host.mark_seen(request)  # the spider's own link to it is then a duplicate
            self.recrawls.push(rank, request)

    def _queue_from_frontier(self, d: dict[str, Any]) -> None:
        request = self.host.request_from_frontier(d)
        if request is not None:
            self.backlog.append(request)

    def request_left(self, request: Request) -> None:
        self.in_flight.discard(request.meta.get(META_ID, -1))

    # -- what survives the process ----------------------------------------------------

    def _pending_new(self) -> list[Request]:
        pending = list(self.backlog)  # the oldest first, back into the store's frontier
        self.backlog.clear()
        if self.newqs is not None:
            pending += iter(self.newqs.pop, None)
        if self.unbudgeted():
            # new URLs shared Scrapy's memory queue (JOBDIR's disk queue keeps its own)
            pending += self.host.drain_memory_queue()
        return pending

    def _state_path(self) -> str | None:
        return self.host.job_file("recrawl_cycle.json")

    def _save(self, reason: str) -> None:
        """With JOBDIR, remember an interrupted cycle so a resume finishes it."""
        path = self._state_path()
        if path is None:
            return
        left = [r.meta.get(META_RANK) for r in self.recrawls.drain()]
        state = {
            "cycle": self.host.store.cycle,
            "finished": reason == "finished",
            "taken_new": self.taken_new,
            "taken_recrawl": self.taken_recrawl,
            "budget": [self.budget.total, self.budget.new, self.budget.monitor],
            "left_ids": [int(self.selected[i]) for i in left if i is not None],
            "fetched": {fp.hex(): list(v) for fp, v in self.fetched.items()},
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(state, fh)

    def _resume(self) -> bool:
        path = self._state_path()
        if path is None or not os.path.exists(path):
            return False
        with open(path, encoding="utf-8") as fh:
            state = json.load(fh)
        os.remove(path)
        store = self.host.store
        if state.get("finished") or state.get("cycle") != store.cycle:
            return False
        self.cycle = store.cycle
        self.budget = Budget(*state["budget"])
        self.taken_new, self.taken_recrawl = state["taken_new"], state["taken_recrawl"]
        self._reset_probe_cap()
        self.started = self.monotonic()
        self.opened(None)  # continuous mode: the resumed cycle's period starts now
        self.cycles_run += 1
        ids = np.asarray(state["left_ids"], dtype=np.int64)
        self.selected = ids
        self.recrawl_fps = set()
        self.fetched = {
            bytes.fromhex(fp): (float(at), bool(spider))
            for fp, (at, spider) in state.get("fetched", {}).items()
        }
        self._queue_recrawls(ids, np.zeros(len(ids)))
        # The new requests pending when the job stopped were kept in the frontier
        # (close() spills them there): take them back, as Scrapy's scheduler takes its
        # pending requests back from JOBDIR, up to what is left of the budget.
        pending = store.frontier_size()
        if self.budget.total is not None:
            pending = min(pending, max(0, self.budget.total - self.taken_new - self.taken_recrawl))
        for d in store.pop_frontier(pending):
            self._queue_from_frontier(d)
        logger.info(
            "recrawl cycle %d resumed from JOBDIR: %d recrawls and %d new URLs left",
            store.cycle,
            len(ids),
            len(self.backlog),
        )
        return True
