"""Where a recrawl scheduler keeps its cycle: the contract both frontiers meet.

:class:`~scrapy_recrawl.scheduler.RecrawlScheduler` is one class. What differs
between one ``scrapy crawl`` and many sharing a Redis is only *where the
cycle lives* -- its number and budget, the requests handed out against it,
the queues of recrawls and new URLs, and who opens, joins and closes it -- and
that is a :class:`CycleFrontier` handed to the scheduler (composition, not a
subclass that overrides the scheduler's methods):

* :class:`~scrapy_recrawl.frontier.local.LocalFrontier`: this process's memory
  (and JOBDIR to resume an interrupted cycle);
* :class:`~scrapy_recrawl.frontier.distributed.DistributedFrontier`: a Redis
  shared by many processes (``RedisRecrawlScheduler`` is the scheduler with it).

The cycle is *decided* once, by the cycle core (:func:`scrapy_recrawl.core.cycle.plan_cycle`
through :meth:`SchedulerHost.plan_cycle`); a frontier only keeps what was decided,
and which URLs the cycle has fetched: every request the scheduler hands out passes
:meth:`CycleFrontier.first_fetch`, so a URL is fetched at most once per cycle
whichever streams asked for it (start request, link, recrawl, monitoring sample,
probe).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import Request, Spider

from ..core.budget import Budget
from ..core.cycle import (
    CycleConfig,
    cycle_done,
    cycles_remain,
    next_period_start,
    side_order,
)
from ..core.meta import KIND_MONITOR, KIND_NEW, KIND_RECRAWL, META_CYCLE, META_ID, META_KIND
from ..core.plugins import ProbeSource
from ..history import HistoryStore, HistoryStoreError
from ..scope import not_a_page
from ..stored_request import StoredRequests
from ..traps import TrapCaps

if TYPE_CHECKING:  # the scheduler's parts a frontier is handed (no import at run time)
    from ..cycle_planner import CyclePlanner
    from ..engine_link import EngineLink

logger = logging.getLogger("scrapy_recrawl.scheduler")


class Dupefilter(Protocol):
    """A dupefilter as Scrapy's scheduler uses one (``DUPEFILTER_CLASS``'s interface)."""

    def request_seen(self, request: Request) -> bool:
        """Mark ``request`` seen; True if it was seen already (a duplicate)."""
        ...

    def log(self, request: Request, spider: Spider) -> None: ...


class SchedulerHost(Protocol):
    """What a frontier may use of the scheduler it serves: its settings, the store and
    named methods; no Scrapy internals. The scheduler keeps Scrapy's queues, its
    dupefilter, the engine and the signals; a frontier asks it for what it needs of
    them (:class:`LocalHost`), and one that keeps its own dupefilter says so
    (:attr:`CycleFrontier.dupefilter`) instead of replacing the scheduler's."""

    #: the spider: its name keys a shared cycle, shared queues (de)serialise its callbacks
    spider: Spider
    settings: Any  # the crawl's settings: a frontier reads its own when it is built
    config: CycleConfig
    stored_requests: StoredRequests  # what of a request is kept for its recrawls
    caps: TrapCaps  # the URL-trap caps (traps.py): the frontier's is applied here
    #: the clock of continuous mode's periods (Twisted's IReactorTime: ``seconds()``,
    #: ``callLater()``): the reactor, or a test's ``twisted.internet.task.Clock``
    clock: Any
    #: the engine, as far as a frontier needs it: quiet? the next request now or soon,
    #: closing the spider (engine_link.py)
    engine_link: EngineLink
    #: the cycle's decision (the cycle core) and record (cycle_summary.py): a frontier
    #: calls ``plan_cycle()`` to open a cycle, ``log_cycle()`` once it is queued,
    #: ``end_cycle()`` when it ends for this process, ``follow_clock()`` to keep the
    #: crawl's wall clock on a shared one (cycle_planner.py)
    planner: CyclePlanner

    @property
    def store(self) -> HistoryStore: ...

    def fingerprint(self, request: Request) -> bytes:
        """The crawl's fingerprint of ``request`` (``REQUEST_FINGERPRINTER_CLASS``)."""
        ...

    def inc_stat(self, key: str, count: int = 1) -> None: ...

    def set_stat(self, key: str, value: Any) -> None: ...

    # -- requests ------------------------------------------------------------------

    def enqueue_now(self, request: Request) -> bool:
        """The scheduler's own enqueue, past any holding by the frontier."""
        ...

    def request_from_frontier(self, d: dict[str, Any]) -> Request | None:
        """A request kept in the store's frontier, ready to queue (None: drop it); marked
        seen in the cycle's dupefilter."""
        ...

    def dropped(self, request: Request) -> None:
        """``request`` is not handed out after all: the engine's ``request_dropped``."""
        ...

    def continuations(self) -> int:
        """Requests waiting in Scrapy's own queues (start requests, redirects, retries)."""
        ...


class RecrawlQueueLike(Protocol):
    """The cycle's recrawls in one process (recrawl_queue.py: per download slot)."""

    def push(self, rank: int, request: Request) -> None: ...

    def pop(self) -> Request | None: ...

    def drain(self) -> list[Request]: ...

    def __len__(self) -> int: ...


class RequestQueue(Protocol):
    """A queue of requests (a Scrapy priority queue: ``push``, ``pop``, ``len``)."""

    def push(self, request: Request) -> None: ...

    def pop(self) -> Request | None: ...

    def __len__(self) -> int: ...


class LocalHost(SchedulerHost, Protocol):
    """What a frontier in the scheduler's own process uses besides: Scrapy's queues, its
    dupefilter and JOBDIR, through named methods of the scheduler (which owns them)."""

    def push_scrapy(self, request: Request) -> None:
        """Into Scrapy's own queues (priorities, JOBDIR), as its scheduler would."""
        ...

    def mark_seen(self, request: Request) -> None:
        """Mark ``request`` seen in the crawl's dupefilter (Scrapy's, for a frontier
        without its own): the spider's link to it is then a duplicate."""
        ...

    def new_url_queue(self) -> RequestQueue:
        """A fresh in-memory Scrapy priority queue, for new URLs."""
        ...

    def recrawl_queue(self) -> RecrawlQueueLike:
        """A fresh queue of recrawls, by score per download slot."""
        ...

    def drain_memory_queue(self) -> list[Request]:
        """Every request in Scrapy's memory queue, taken out (the disk queue keeps its own)."""
        ...

    def job_file(self, name: str) -> str | None:
        """The path of ``name`` in JOBDIR's request folder; None without JOBDIR."""
        ...

    def rebuild_request(self, d: dict[str, Any] | None, url_id: int) -> Request:
        """A stored request dict as a Request; a plain GET of the URL when unusable."""
        ...

    @property
    def prober(self) -> ProbeSource | None:
        """The loop-time probes' source (a plug-in: core/plugins.py), None without
        probes; known once the scheduler is open."""
        ...


def recrawl_kind(score: float) -> str:
    """A selected URL's kind: the monitoring sample is selected with the score +inf
    (core/selection.py), the scorer's picks with theirs."""
    return KIND_MONITOR if score == float("inf") else KIND_RECRAWL


@dataclass(frozen=True)
class Taken:
    """Budgeted requests handed out this cycle, by side."""

    new: int = 0
    recrawl: int = 0
    probe: int = 0

    @property
    def total(self) -> int:
        return self.new + self.recrawl + self.probe


class CycleFrontier(ABC):
    """A scheduler's cycle, its budget counters and its queues (module docstring)."""

    #: loop-time probes (paper 001) keep a clock per process: only a local frontier
    supports_probes: bool = True
    #: the cycle is shared with other processes (its summary is this process's part)
    many_processes: bool = False
    #: the dupefilter of this cycle's requests when the frontier keeps its own (a
    #: shared cycle: a set per cycle in Redis); None: the scheduler's (Scrapy's)
    dupefilter: Dupefilter | None = None

    def __init__(self, host: SchedulerHost) -> None:
        self.host = host
        self.cycle = 0
        self.budget = Budget(None, None)
        self.cycles_run = 0  # cycles this process opened or joined
        #: the cycle clock (seconds, only differences count: a cycle's length in its
        #: summary); a test may set its own
        self.monotonic: Callable[[], float] = time.monotonic
        self.started = self.monotonic()  # when the current cycle started
        # continuous mode (one cycle per RECRAWL_CYCLE_PERIOD), in self.now()'s time:
        self.opened_at = 0.0  # when the open cycle opened
        self.period_start = 0.0  # when the period it opened in started
        #: the open cycle's work is over (summed up); the next opens at its period start
        self.waiting = False
        self._summarized = 0  # the last cycle summed up by this process (once each)
        self._period_call: Any = None  # the timer that wakes the crawl at a period start

    # -- life ------------------------------------------------------------------

    @abstractmethod
    def open(self) -> None:
        """The spider is open: start, resume or join a cycle."""

    @abstractmethod
    def close(self, reason: str) -> None:
        """The spider closes: keep what the next run needs, leave the cycle."""

    # -- requests in -------------------------------------------------------------

    def enqueue(self, request: Request) -> bool:
        """The scheduler's ``enqueue_request``; a shared frontier holds requests while
        its server is away."""
        return self.host.enqueue_now(request)

    @abstractmethod
    def start_taken(self, request: Request) -> str | None:
        """Why a start request is not fetched by this process this cycle (a stats key
        under ``recrawl/``), or None: fetch it."""

    @abstractmethod
    def push_new(self, request: Request) -> None:
        """Queue a new URL the scheduler admitted."""

    # -- requests out -------------------------------------------------------------

    def next_request(self) -> Request | None:
        """The next budgeted request (probe, recrawl or new URL), or None for now."""
        if self.host.config.continuous:
            self.maybe_roll_over(check_work=False)
        if not self.budget_left():
            return None
        request = self.next_probe()
        if request is None and not self.waiting:  # between cycles: only a due probe
            request = self.next_budgeted()
        if request is not None:
            self.host.inc_stat("scheduler/dequeued")
        return request

    def next_budgeted(self) -> Request | None:
        """A recrawl or a new URL, whichever side's turn it is (core.cycle.side_order)."""
        taken = self.taken()
        for side, quota in side_order(self.budget, taken.new, taken.recrawl, quiet=self.quiet):
            request = self.take(side, quota)
            while request is not None and not self.first_fetch(request):
                self.give_back(side, request)  # fetched this cycle already: not counted
                request = self.take(side, quota)
            if request is None:
                continue
            if side == "new":
                request.meta[META_CYCLE] = self.cycle
                request.meta[META_KIND] = KIND_NEW
                self.host.inc_stat("recrawl/fetched_new")
            return request
        return None  # wait: responses in flight may still bring new URLs

    @abstractmethod
    def take(self, side: str, quota: int | None) -> Request | None:
        """Count one budgeted request of ``side`` and pop it (None: none to take)."""

    @abstractmethod
    def give_back(self, side: str, request: Request) -> None:
        """Uncount a request :meth:`take` gave that is not fetched after all."""

    # -- each URL at most once per cycle ---------------------------------------------

    def first_fetch(self, request: Request, *, due: float | None = None) -> bool:
        """Whether ``request`` goes out: each URL at most once per cycle.

        Asked of every request the scheduler hands out; requests that are not pages
        (scope.not_a_page) and retries (the same fetch again, after a failure) pass.
        Otherwise a URL already fetched in this cycle is not fetched again, with two
        exceptions, both asked for explicitly:

        * the spider's own ``dont_filter=True`` requests (Scrapy's "fetch it again",
          and their redirects, which RedirectMiddleware makes ``dont_filter`` too):
          duplicates of each other all go out, as Scrapy's scheduler sends them; but
          not after the add-on's streams fetched the URL (a recrawl, the monitoring
          sample, a probe, a new URL, a link): start_urls' requests are
          ``dont_filter``, and a start URL that is also a link is fetched once;
        * a probe (``due``: the wall time it came due) of a URL fetched *before* that
          in this cycle: a later measurement the probe schedule asks for (in a cycle
          longer than the gap, e.g. a continuous one: docs/baskets.md).
        """
        if not_a_page(request) is not None or "retry_times" in request.meta:
            return True
        # META_ID: a recrawl, rebuilt from a stored request that may be dont_filter
        spider = request.dont_filter and due is None and META_ID not in request.meta
        if self.mark_fetched(self.host.fingerprint(request), spider, due):
            return True
        self.host.inc_stat("recrawl/fetched_this_cycle_dropped")
        logger.debug("recrawl: %s was fetched in cycle %d already: dropped", request, self.cycle)
        # as the engine says of a request its scheduler refuses (extensions count them)
        self.host.dropped(request)
        return False

    @abstractmethod
    def mark_fetched(self, fingerprint: bytes, spider: bool, due: float | None) -> bool:
        """Note the URL as fetched in this cycle, now, by a ``spider`` request
        (``dont_filter``) or not; False: it is not fetched again (:meth:`first_fetch`)."""

    def quiet(self) -> bool:
        """Nothing in flight anywhere in the cycle can discover more new URLs."""
        return self.host.engine_link.quiet()

    def request_left(self, request: Request) -> None:  # noqa: B027 -- only a local one tracks them
        """``request`` left the downloader (continuous mode: its recrawl is no longer in
        flight)."""

    # -- the budget ------------------------------------------------------------------

    @abstractmethod
    def taken(self) -> Taken: ...

    def budget_left(self) -> bool:
        total = self.budget.total
        return total is None or self.taken().total < total

    def next_probe(self) -> Request | None:
        """A due probe of a new URL (loop-time baskets), or None."""
        return None

    def probe_due(self) -> bool:
        """A probe is due and may be handed out now (the spider has work pending)."""
        return False

    def probe_allowed(self) -> bool:
        """A probe may be handed out now (within the cycle's probe cap)."""
        return self.supports_probes

    def probe_taken(self) -> None:  # noqa: B027 -- only a frontier with probes counts them
        """A probe was handed out: it counts against the budget."""

    def unbudgeted(self) -> bool:
        """New URLs share Scrapy's own queues (a per-run warm-up cycle, one process)."""
        return False

    # -- what is queued ------------------------------------------------------------

    @abstractmethod
    def queued(self) -> int:
        """Recrawls and new URLs queued in this cycle."""

    def waiting_new(self) -> int:
        """New URLs queued for this cycle and not handed out yet."""
        return 0

    def new_backlog(self) -> int:
        """New URLs waiting, not fetched: the store's frontier and this cycle's queues
        (0 when the store or the shared queues cannot say)."""
        try:
            return int(self.host.store.frontier_size()) + self.waiting_new()
        except Exception:  # noqa: BLE001 -- a store or Redis away: said where it matters
            return 0

    def has_pending(self) -> bool:
        return not self.waiting and self.budget_left() and self.queued() > 0

    def keep_for_later(self, requests: list[Request]) -> int:
        """New URLs this cycle did not fetch: into the store's frontier for a later
        cycle; returns how many were not there already."""
        host, items = self.host, []
        for request in requests:
            if not_a_page(request) is not None:
                continue  # bookkeeping (a sitemap, robots.txt): never a URL to recrawl
            try:
                d = request.to_dict(spider=host.spider)
            except ValueError:
                host.inc_stat("recrawl/frontier_unserializable")
                continue
            # as the spider made it (never downloaded, or a redirect's or a retry's copy:
            # the note of the request it came from): stored_request.py
            d = host.stored_requests.stored(d, request, downloaded=False)
            items.append((host.fingerprint(request), d, request.priority))
        if not items:
            return 0
        room = host.caps.frontier_room(host.store, len(items))  # RECRAWL_FRONTIER_MAX
        if room < len(items):
            # the highest priority kept (Scrapy's order: a greater priority first)
            items.sort(key=lambda item: -item[2])
            items = items[:room]
            if not items:
                return 0
        added = host.store.push_frontier(items)
        host.inc_stat("recrawl/frontier_saved", added)
        return added

    # -- the end of a cycle, for this process ---------------------------------------------

    def summarize_cycle(self) -> None:
        """The current cycle ends for this process (its work over in continuous mode, a
        roll-over, another process's roll-over adopted, the spider closing): its summary,
        once (cycle_summary.py)."""
        if self.cycle > 0 and self._summarized != self.cycle:
            self._summarized = self.cycle
            self.host.planner.end_cycle(
                self.cycle,
                self.budget,
                self.monotonic() - self.started,
                shared=self.many_processes,
                backlog=self.new_backlog(),
            )

    # -- continuous mode: one cycle per RECRAWL_CYCLE_PERIOD ------------------------------

    def now(self) -> float:
        """The time the periods are kept in: the scheduler's clock (the reactor's)."""
        return float(self.host.clock.seconds())

    def opened(self, period_start: float | None) -> None:
        """A cycle opened now, in the period starting at ``period_start`` (None: now)."""
        now = self.now()
        self.opened_at = now
        self.period_start = now if period_start is None else period_start
        self.waiting = False

    def work_left(self) -> bool:
        """The open cycle still has something to do: a budgeted request to hand out, or
        something in flight or queued that may bring one (a response, a continuation)."""
        return self.has_pending() or not self.quiet() or self.host.continuations() > 0

    def maybe_roll_over(self, *, check_work: bool = True) -> None:
        """Continuous mode: when the open cycle is over (core.cycle.cycle_done), sum it up;
        open the next one at the start of the next period (one cycle per
        RECRAWL_CYCLE_PERIOD, core.cycle.next_period_start) and, until then, wait idle: a
        timer on the clock wakes the crawl then, nothing polls.

        ``check_work``: also ask whether the cycle has work left (when the spider is idle);
        otherwise only its time is looked at (before each request handed out)."""
        config = self.host.config
        now = self.now()
        if not self.waiting:
            over = cycle_done(
                config,
                work_left=self.work_left if check_work else lambda: True,
                elapsed=now - self.opened_at,
                period_elapsed=now - self.period_start,
            )
            if not over:
                return
            self.finish_cycle()
        if not cycles_remain(config, self.cycles_run):
            return  # RECRAWL_MAX_CYCLES: the spider closes once idle
        start = next_period_start(config, self.period_start, now)
        if start <= now:
            self.roll_over(start)
        else:
            self.wake_at(start)

    def finish_cycle(self) -> None:
        """Continuous mode: the open cycle's work is over for this process: it is summed up
        now, and nothing is handed out against it but due probes until the next opens."""
        self.drop_queued_recrawls()
        self.summarize_cycle()
        self.waiting = True
        # its visits written now, not at the next flush: the process that opens the next
        # cycle (on Redis, maybe another one) scores them
        try:
            self.host.store.flush()
        except HistoryStoreError:
            pass  # kept and retried at the next flush; said there if it fails for good

    def drop_queued_recrawls(self) -> None:  # noqa: B027 -- a shared queue is dropped at roll-over
        """Recrawls not handed out when the cycle ended: dropped (rescored with the rest)."""

    def wake_at(self, when: float) -> None:
        """Wake the crawl at ``when`` (self.now()'s time): one timer on the clock."""
        if self._period_call is not None and self._period_call.active():
            return
        delay = max(0.0, when - self.now())
        self._period_call = self.host.clock.callLater(delay, self.host.engine_link.wake)
        logger.info(
            "recrawl: waiting %.1f s for the next cycle (RECRAWL_CYCLE_PERIOD = %g s)",
            delay,
            self.host.config.cycle_period,
        )

    def cancel_wake(self) -> None:
        if self._period_call is not None and self._period_call.active():
            self._period_call.cancel()
        self._period_call = None

    @abstractmethod
    def roll_over(self, period_start: float) -> None:
        """Continuous mode: end the current cycle and start the next, in the period that
        starts at ``period_start``."""
