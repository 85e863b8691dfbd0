"""The cycle of many ``scrapy crawl`` s sharing one Redis (RedisRecrawlScheduler).

docs/distributed.md has the whole story; in short:

* **Queues and dupefilter are the frontier's own**, in Redis, never Scrapy's
  scheduler's (frontier/shared_queues.py: scrapy-redis's classes, new URLs in
  ``SCHEDULER_QUEUE_CLASS``, recrawls in a ``FifoQueue``, a dupefilter set per
  cycle, which the scheduler asks for as :attr:`CycleFrontier.dupefilter`); every
  Redis command is in :mod:`scrapy_recrawl.frontier.redis`; its settings and its
  Redis are read at start-up (frontier/shared_setup.py).
* **A cycle is opened once.** The first process to start takes a lock with an
  expiry (``RECRAWL_REDIS_LOCK_SECONDS``), advances the cycle counter, scores the
  known URLs (the cycle core, through the scheduler) and pushes the top-k and the
  frontier's share once; the others wait for the lock and *join* the open cycle.
  The last process to leave a finished cycle (queues drained or budget handed
  out) closes it, spilling leftover new URLs into the store's frontier; the next
  ``scrapy crawl`` opens the next one.
* **The budget is shared**: every budgeted request is reserved by one Lua
  script against counters in Redis before it is popped, so N processes together
  never hand out more than the cycle's budget.
* **Start requests** are claimed per cycle: one process fetches each, and none
  does when the cycle's recrawls already include its URL.
* **Each URL once per cycle**, across the processes: every request handed out is
  first added to the cycle's fetched URLs (``{s}:fetched:<cycle>``); one already
  there is dropped (and its budget given back), unless both are the spider's own
  ``dont_filter`` requests (frontier/base.py: ``first_fetch``).
* A process whose queues are empty stays open while another process in the
  same cycle is still busy (it may discover more URLs), polling twice a second
  (the workers' heartbeats: frontier/workers.py).
* If Redis goes away mid-crawl, the scheduler keeps the spider open and retries
  for ``RECRAWL_REDIS_OUTAGE_SECONDS``, then closes it with the reason
  ``recrawl_redis_unavailable`` and an error naming the Redis URL
  (frontier/outage.py).
* If it comes back without the history (restarted without persistence, flushed),
  the store's epoch says so (history/epoch.py): checked at every cycle opened,
  joined or adopted, by every write, and every few seconds; the spider closes with
  ``recrawl_store_lost`` (or goes on: ``RECRAWL_ON_STORE_LOSS``). That is not an
  outage to wait out.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request

from ..core.budget import Budget
from ..core.cycle import next_period_start
from ..history import StoreLost
from .base import CycleFrontier, SchedulerHost, Taken
from .fence import EpochFence
from .outage import Outage, is_redis_error
from .redis import RedisFrontier, spider_keys
from .shared_queues import SharedQueues
from .shared_setup import shared_setup
from .workers import WorkerRegistry

logger = logging.getLogger("scrapy_recrawl.redis_scheduler")

# Seconds between polls of the shared queues while other workers are busy.
_POLL = 0.5


class DistributedFrontier(CycleFrontier):
    """A spider's cycle, budget and queues in a Redis shared by many processes."""

    supports_probes = False
    many_processes = True

    def __init__(self, host: SchedulerHost) -> None:
        super().__init__(host)
        setup = shared_setup(host.settings)  # said in one line and raised when wrong
        self.setup = setup
        self.persist = setup.persist
        self.server, self.redis_location = setup.server, setup.location
        self.workers = WorkerRegistry(setup.worker_timeout)
        self.worker_id = self.workers.worker_id  # host:pid:token
        self._offset = 0.0  # the Redis's clock less this process's: self.now() is the Redis's
        self._outage = Outage(host, setup.location, setup.outage_seconds)
        self.keys: RedisFrontier | None = None
        self._queues: SharedQueues | None = None

    @property
    def shared(self) -> RedisFrontier:
        assert self.keys is not None, "the frontier is not open"
        return self.keys

    @property
    def queues(self) -> SharedQueues:
        assert self._queues is not None, "the frontier is not open"
        return self._queues

    # -- life ------------------------------------------------------------------

    def open(self) -> None:
        host, spider = self.host, self.host.spider
        names = spider_keys(host.settings, spider.name, self.setup.cluster)
        self.keys = RedisFrontier(
            self.server, names.scheduler, self.worker_id, lock_seconds=self.setup.lock_seconds
        )
        # the store's epoch, followed (frontier/fence.py): a write refused is checked there
        fence = EpochFence(host.store, self.redis_location, host.inc_stat)
        self.fence = fence
        self.keys.on_refused = lambda found: fence.refused(self.shared, found)
        self.workers.attach(self.keys)
        self._queues = SharedQueues(
            self.keys,
            names,
            spider,
            queue_cls=self.setup.queue_cls,
            dupefilter_cls=self.setup.dupefilter_cls,
            serializer=self.setup.serializer,
            debug=host.settings.getbool("DUPEFILTER_DEBUG"),
            location=self.redis_location,
            inc_stat=host.inc_stat,
        )
        # Scrapy's own queues and dupefilter (the scheduler's) hold this process's
        # continuations: redirects, retries, dont_filter requests; the cycle's
        # dupefilter is the shared one from the cycle's adoption (self.dupefilter).
        with self.shared.lock():
            # the store's epoch, opened just now, is the one this process writes under
            self.shared.take_epoch(fence.epoch())
            state = self.shared.state()
            open_cycle = (
                state
                and int(state.get("cycle", -1)) == host.store.cycle
                and not int(state.get("done", 0))
            )
            if open_cycle and not self.persist and not self.workers.others():
                # everyone left an unfinished cycle and nothing is kept between runs
                # (SCHEDULER_PERSIST off): end it, as a run without JOBDIR does
                self._end_cycle(int(state["cycle"]), "abandoned")
                open_cycle = False
            if open_cycle:
                self._join(state)
            else:
                self._open_cycle()
            self.workers.write(self.cycle, busy=True, force=True)

    def close(self, reason: str) -> None:
        self.cancel_wake()
        self._outage.cancel()
        try:
            self.summarize_cycle()  # this process's part of the cycle, before it leaves
        except Exception as exc:  # noqa: BLE001 -- Redis gone: the figures are lost, not the leave
            logger.error(
                "recrawl: could not keep the summary of cycle %d in the Redis at %s: %s",
                self.cycle,
                self.redis_location,
                exc,
            )
        try:
            self._leave(reason)
        except StoreLost:
            pass  # said once as the crawl stopped; nothing is written into another history
        except Exception as exc:  # noqa: BLE001 -- Redis gone: leave the state as it is
            logger.error(
                "recrawl: could not leave cycle %d cleanly in the Redis at %s: %s",
                self.cycle,
                self.redis_location,
                exc,
            )

    # -- requests in -------------------------------------------------------------

    def enqueue(self, request: Request) -> bool:
        try:
            self._outage.flush_held()
            return self.host.enqueue_now(request)
        except Exception as exc:  # noqa: BLE001 -- redis-py's errors, the store's over it
            if not is_redis_error(exc):
                raise
            self._outage.hold(request, exc)
            return True

    def start_taken(self, request: Request) -> str | None:
        df: Any = self.dupefilter  # the cycle's shared set (scrapy-redis's interface)
        assert df is not None, "no cycle adopted"
        fp = df.request_fingerprint(request)
        mine = self.shared.claim_start(self.cycle, fp)
        if mine is not None:
            return None if mine else "start_claimed_elsewhere"
        if self.shared.is_pick(self.cycle, fp):
            return "start_is_recrawl"  # its recrawl is queued this cycle
        return None

    def push_new(self, request: Request) -> None:
        self.queues.new.push(request)
        self.host.inc_stat("scheduler/enqueued")
        self.host.inc_stat("scheduler/enqueued/redis")

    # -- requests out ----------------------------------------------------------------

    def next_request(self) -> Request | None:
        try:
            self._outage.flush_held()
            if self.host.config.continuous:
                self._follow_cycle()
            request = super().next_request()
            self._outage.ok()
        except Exception as exc:  # noqa: BLE001
            self._outage.failed(exc)
            self._outage.poke(1.0)
            return None
        try:
            busy = request is not None or not (self.waiting or self.host.engine_link.quiet())
            self.workers.write(self.cycle, busy=busy)
        except Exception as exc:  # noqa: BLE001
            # the Redis gone since (an outage), or back empty (StoreLost, from the fence:
            # said once, the spider closing); a request taken is handed out all the same
            self._outage.failed(exc)
            self._outage.poke(1.0)
            return request
        if request is None and not self.waiting:  # between cycles the period's timer wakes it
            self._outage.poke(_POLL)
        return request

    def take(self, side: str, quota: int | None) -> Request | None:
        if not self.shared.reserve(side, self.budget.total, quota):
            return None
        queues = self.queues
        request = queues.pop(queues.recrawls) if side == "recrawl" else queues.pop_new()
        if request is None:  # another process emptied it first: give the budget back
            self.shared.give_back(side)
        return request

    def give_back(self, side: str, request: Request) -> None:
        self.shared.give_back(side)

    def mark_fetched(self, fingerprint: bytes, spider: bool, due: float | None) -> bool:
        # no probes here (supports_probes is False): `due` is always None
        try:
            return self.shared.mark_fetched(self.cycle, fingerprint.hex(), spider)
        except Exception as exc:  # noqa: BLE001 -- redis-py's errors
            if not is_redis_error(exc):
                raise
            return True  # Redis away: fetch it rather than lose it (the outage is handled)

    def quiet(self) -> bool:
        # nothing in flight anywhere can discover more new URLs
        return self.host.engine_link.quiet() and not self.workers.others_busy(self.cycle)

    def taken(self) -> Taken:
        taken = self.shared.taken()
        return Taken(taken.get("new", 0), taken.get("recrawl", 0))

    def budget_left(self) -> bool:
        total = self.budget.total
        return total is None or self.shared.taken().get("total", 0) < total

    def queued(self) -> int:
        held = len(self._outage.held)
        try:
            return len(self.queues.recrawls) + self.waiting_new() + held
        except Exception:  # noqa: BLE001 -- Redis away: what we know locally
            return held

    def waiting_new(self) -> int:
        """New URLs queued for the cycle, by all processes, not handed out yet."""
        return self.queues.waiting_new()

    def has_pending(self) -> bool:
        if self._outage.held:
            return True
        try:
            if self.waiting:  # between cycles (continuous mode): idle until the period starts
                if self.workers.write(self.cycle, busy=False):
                    # only a call that went through ends an outage (a status written a
                    # moment ago is skipped: no call, no news of the Redis)
                    self._outage.ok()
                return False
            pending = self.budget_left() and (
                len(self.queues.recrawls) > 0 or self.waiting_new() > 0
            )
            if not pending:
                self.workers.write(self.cycle, busy=not self.host.engine_link.quiet())
                pending = self.workers.others_busy(self.cycle)
            self._outage.ok()
            return pending
        except Exception as exc:  # noqa: BLE001
            return self._outage.failed(exc)

    # -- cycles ------------------------------------------------------------------

    def now(self) -> float:
        """The Redis's time (as of the last cycle adopted: this clock plus its offset)."""
        return super().now() + self._offset

    def _adopt(self, state: dict[str, str]) -> None:
        # each cycle opened, joined or adopted: still the history this process opened?
        self.fence.check()
        self.cycle = int(state["cycle"])
        total, new = int(state["total"]), int(state["new"])
        monitor = int(state.get("monitor", 0))  # the sample, on top of the budget's pages
        self.budget = Budget(None if total < 0 else total, None if new < 0 else new, monitor)
        # the periods are kept in the Redis's time, one clock for every process
        self._sync_clock()
        opened = float(state["opened"])
        self.started = self.monotonic() - max(0.0, self.now() - opened)
        self.opened_at = opened
        self.period_start = float(state.get("period_start", opened))
        self.waiting = False
        self.dupefilter = self.queues.dupefilter_of(self.cycle)
        self.workers.forget_others()

    def _sync_clock(self) -> float:
        """Read the Redis's clock: the periods' offset (to the scheduler's clock) and the
        crawl's wall clock (visits, summaries, a cycle's planning time: cycle_summary.py)
        follow it, whatever this machine's own clock says. Returns the Redis's time."""
        now = self.shared.now()
        self._offset = now - super().now()
        self.host.planner.follow_clock(now)
        return now

    def _join(self, state: dict[str, str]) -> None:
        self._adopt(state)
        self.cycles_run += 1
        pending = len(self.queues.recrawls) + self.waiting_new()
        if pending:
            # scrapy-redis's words, so its users recognise a shared queue being picked up
            self.host.spider.log(f"Resuming crawl ({pending} requests scheduled)")
        self.host.set_stat("recrawl/cycle", self.cycle)
        self.host.set_stat("recrawl/joined_cycle", self.cycle)
        logger.info(
            "recrawl cycle %d joined (opened by another process): budget %s, %d requests queued",
            self.cycle,
            self.budget.pages,
            pending,
        )

    def _open_cycle(self, period_start: float | None = None) -> None:
        """Advance the cycle counter, score, push the top-k and the frontier's share:
        once, by the process holding the lock. ``period_start``: the start of the period
        it opens in (continuous mode; None: now), in the Redis's time."""
        self.shared.forget_recrawls()  # from a cycle that was never closed
        self._sync_clock()  # the plan's `now` (the hours terminal) in the Redis's time
        plan = self.host.planner.plan_cycle()
        self.cycles_run += 1
        self.cycle, budget = plan.cycle, plan.budget
        # the cycle's dupefilter from now: the recrawls and the backlog are marked seen
        self.dupefilter = self.queues.dupefilter_of(plan.cycle)
        pushed = self.queues.push_recrawls(
            self.host.store, plan.cycle, self.dupefilter, plan.selection.ids, plan.selection.scores
        )
        for d in self.host.store.pop_frontier(plan.new_quota):
            request = self.host.request_from_frontier(d)
            if request is not None:
                self.queues.backlog.push(request)
        opened = self.shared.now()
        self.shared.open_cycle(
            {
                "cycle": plan.cycle,
                "total": -1 if budget.total is None else budget.total,
                "new": -1 if budget.new is None else budget.new,
                "monitor": budget.monitor,
                "opened": repr(opened),
                "period_start": repr(opened if period_start is None else period_start),
                "opened_by": self.worker_id,
                "done": 0,
                "scheduled": pushed,
            }
        )
        self._adopt(self.shared.state())
        self.host.inc_stat("recrawl/cycles_opened")
        self.host.planner.log_cycle(plan, pushed)

    def _follow_cycle(self) -> None:
        """Continuous mode: adopt a cycle another process has rolled over to."""
        state = self.shared.state()
        if state and int(state["cycle"]) != self.cycle:
            self._adopt_rolled_over(state)

    def _adopt_rolled_over(self, state: dict[str, str]) -> None:
        self.summarize_cycle()  # another process rolled over: ours has ended (once)
        self._adopt(state)
        self.cycles_run += 1
        self.host.set_stat("recrawl/cycle", self.cycle)

    def maybe_roll_over(self, *, check_work: bool = True) -> None:
        """As every frontier does (frontier/base.py), with a Redis that goes away meanwhile
        an outage, as in :meth:`next_request`: waited for (the spider kept open, asked
        again soon), or its loss found when it answers (history/epoch.py). The scheduler's
        spider_idle handler rolls cycles over too: an error out of it is logged by Scrapy
        with a traceback and, the spider found idle, closes it "finished" (exit 0)."""
        try:
            super().maybe_roll_over(check_work=check_work)
        except Exception as exc:  # noqa: BLE001 -- a non-Redis error is raised again
            self._outage.failed(exc)
            self._outage.poke(1.0)

    def roll_over(self, period_start: float) -> None:
        """The next period has started (by this process's reckoning): the first process to
        get the lock checks it by the Redis's clock, ends the cycle and opens the next, once
        for all; the others adopt it."""
        lock = self.shared.lock()
        if not lock.acquire(blocking=False):
            self._outage.poke(_POLL)  # another process is rolling over: adopt its cycle soon
            return
        try:
            state = self.shared.state()
            if not state:
                # the cycle state vanished with the Redis's data and the crawl goes on
                # (RECRAWL_ON_STORE_LOSS = "continue"): open the next cycle afresh
                self._open_cycle()
                return
            if int(state.get("cycle", -1)) != self.cycle:
                self._adopt_rolled_over(state)  # rolled over already, by someone else
                return
            now = self._sync_clock()
            start = next_period_start(
                self.host.config, float(state.get("period_start", state["opened"])), now
            )
            if start > now:  # not yet by the Redis's clock
                self.wake_at(start)
                return
            self.summarize_cycle()
            self._end_cycle(self.cycle, "rolled over")
            self._open_cycle(start)
        except StoreLost:
            pass  # said once, and the spider is closing (history/epoch.py)
        finally:
            _release(lock)

    def _leave(self, reason: str) -> None:
        """Deregister; the last process out of a finished cycle closes it."""
        with self.shared.lock():
            self.workers.leave()
            if self.workers.others():
                return
            state = self.shared.state()
            if not state or int(state.get("cycle", -1)) != self.cycle or int(state.get("done", 0)):
                return
            drained = not self.budget_left() or (
                len(self.queues.recrawls) == 0 and self.waiting_new() == 0 and not self._outage.held
            )
            if (reason == "finished" and drained) or not self.persist:
                self._end_cycle(self.cycle, reason)
            else:
                logger.info(
                    "recrawl cycle %d left open (%s, SCHEDULER_PERSIST): the next run resumes it",
                    self.cycle,
                    reason,
                )

    def _end_cycle(self, cycle: int, reason: str) -> None:
        """Close ``cycle``: new URLs left over go to the frontier, the rest is dropped."""
        left = self.queues.drain_new()
        left += [r for r in self._outage.held if not r.meta.get("is_start_request")]
        self._outage.held = []
        kept = self.keep_for_later(left)
        self.shared.close_cycle(cycle, self.queues.names.dupefilter_of(cycle))
        logger.info("recrawl cycle %d closed (%s): %d new URLs kept for later", cycle, reason, kept)


def _release(lock: Any) -> None:
    """Release the roll-over's lock; one the Redis no longer holds (gone with its data,
    or with the Redis itself: then it expires with RECRAWL_REDIS_LOCK_SECONDS) is
    nothing to release, and must not hide what went wrong under it."""
    try:
        lock.release()
    except Exception as exc:  # noqa: BLE001 -- redis-py's errors (LockError is one)
        if not is_redis_error(exc):
            raise
