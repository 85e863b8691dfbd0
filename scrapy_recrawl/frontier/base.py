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
from dataclasses import dataclass
from typing import Any, Protocol

from scrapy import Request, Spider, signals

from ..core.budget import Budget
from ..core.cycle import CycleConfig, CyclePlan, cycle_over, side_order
from ..core.meta import KIND_MONITOR, KIND_NEW, KIND_RECRAWL, META_CYCLE, META_ID, META_KIND
from ..history import HistoryStore
from ..scope import not_a_page

logger = logging.getLogger("scrapy_recrawl.scheduler")


class SchedulerHost(Protocol):
    """What a frontier may use of the scheduler it serves."""

    crawler: Any
    spider: Spider
    df: Any  # Scrapy's dupefilter; a shared frontier swaps in its own per cycle
    config: CycleConfig
    mqs: Any  # Scrapy's memory queue
    dqdir: str | None  # JOBDIR's request folder
    prober: Any  # the probe source (loop-time baskets), or None

    @property
    def store(self) -> HistoryStore: ...

    @property
    def fingerprinter(self) -> Any: ...

    def inc_stat(self, key: str, count: int = 1) -> None: ...

    def plan_cycle(self, exclude: Any = None) -> CyclePlan:
        """Advance the store's cycle counter and decide the new cycle (the cycle core)."""
        ...

    def log_cycle(self, plan: CyclePlan, scheduled: int) -> None: ...

    def end_cycle(
        self, cycle: int, budget: Budget, seconds: float, *, shared: bool, backlog: int = 0
    ) -> None:
        """``cycle`` ended for this process: say and keep its figures (cycle_summary.py);
        ``backlog``: new URLs left waiting for a later cycle."""
        ...

    def request_from_frontier(self, d: dict[str, Any]) -> Request | None:
        """A request kept in the store's frontier, ready to queue (None: drop it)."""
        ...

    def rebuild_request(self, d: dict[str, Any] | None, url_id: int) -> Request:
        """A stored request dict as a Request; a plain GET of the URL when unusable."""
        ...

    def enqueue_now(self, request: Request) -> bool:
        """The scheduler's own enqueue, past any holding by the frontier."""
        ...

    def push_scrapy(self, request: Request) -> None:
        """Into Scrapy's own queues (priorities, JOBDIR), as its scheduler would."""
        ...

    def new_queue(self) -> Any:
        """A fresh in-memory Scrapy priority queue."""
        ...

    def quiet(self) -> bool:
        """Nothing downloading or scraping in this process: no new URL can turn up here."""
        ...

    def next_probe(self) -> Request | None:
        """A due probe of a new URL (loop-time baskets), or None."""
        ...

    def engine(self) -> Any: ...


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

    def __init__(self, host: SchedulerHost) -> None:
        self.host = host
        self.cycle = 0
        self.budget = Budget(None, None)
        self.cycles_run = 0  # cycles this process opened or joined
        self.started = time.monotonic()  # when the current cycle started

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
            self.maybe_roll_over()
        if not self.budget_left():
            return None
        request = self.host.next_probe() if self.supports_probes else None
        if request is None:
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
        if self.mark_fetched(self.host.fingerprinter.fingerprint(request), spider, due):
            return True
        self.host.inc_stat("recrawl/fetched_this_cycle_dropped")
        logger.debug("recrawl: %s was fetched in cycle %d already: dropped", request, self.cycle)
        # as the engine says of a request its scheduler refuses (extensions count them)
        self.host.crawler.signals.send_catch_log(
            signals.request_dropped, request=request, spider=self.host.spider
        )
        return False

    @abstractmethod
    def mark_fetched(self, fingerprint: bytes, spider: bool, due: float | None) -> bool:
        """Note the URL as fetched in this cycle, now, by a ``spider`` request
        (``dont_filter``) or not; False: it is not fetched again (:meth:`first_fetch`)."""

    def quiet(self) -> bool:
        """Nothing in flight anywhere in the cycle can discover more new URLs."""
        return self.host.quiet()

    # -- the budget ------------------------------------------------------------------

    @abstractmethod
    def taken(self) -> Taken: ...

    def budget_left(self) -> bool:
        total = self.budget.total
        return total is None or self.taken().total < total

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
        return self.budget_left() and self.queued() > 0

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
            items.append((host.fingerprinter.fingerprint(request), d, request.priority))
        if not items:
            return 0
        added = host.store.push_frontier(items)
        host.inc_stat("recrawl/frontier_saved", added)
        return added

    # -- the end of a cycle, for this process ---------------------------------------------

    def summarize_cycle(self) -> None:
        """The current cycle ends for this process (a roll-over, another process's roll-over
        adopted, the spider closing): its summary, once (cycle_summary.py)."""
        if self.cycle > 0:
            self.host.end_cycle(
                self.cycle,
                self.budget,
                time.monotonic() - self.started,
                shared=self.many_processes,
                backlog=self.new_backlog(),
            )

    # -- continuous mode -------------------------------------------------------------

    def cycle_over(self) -> bool:
        """The budget is spent or the cycle's time is up, and cycles remain."""
        return cycle_over(
            self.host.config,
            budget_left=self.budget_left(),
            elapsed=time.monotonic() - self.started,
            cycles_run=self.cycles_run,
        )

    def maybe_roll_over(self) -> None:
        if self.cycle_over():
            self.roll_over()

    @abstractmethod
    def roll_over(self) -> None:
        """End the current cycle and start the next (continuous mode)."""
