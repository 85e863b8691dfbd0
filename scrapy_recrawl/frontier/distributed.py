"""The cycle of many ``scrapy crawl`` s sharing one Redis (RedisRecrawlScheduler).

docs/distributed.md has the whole story; in short:

* **Queues and dupefilter are scrapy-redis's own classes** (new URLs in
  ``SCHEDULER_QUEUE_CLASS``, recrawls in a ``FifoQueue``, a dupefilter set per
  cycle); every Redis command is in :mod:`scrapy_recrawl.frontier.redis`.
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
  same cycle is still busy (it may discover more URLs), polling twice a second.
* If Redis goes away mid-crawl, the scheduler keeps the spider open and retries
  for ``RECRAWL_REDIS_OUTAGE_SECONDS``, then closes it with the reason
  ``recrawl_redis_unavailable`` and an error naming the Redis URL.
* If it comes back without the history (restarted without persistence, flushed),
  the store's epoch says so (history/epoch.py): checked at every cycle opened,
  joined or adopted, by every write, and every few seconds; the spider closes with
  ``recrawl_store_lost`` (or goes on: ``RECRAWL_ON_STORE_LOSS``). That is not an
  outage to wait out.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
from scrapy import Request

from ..core.budget import Budget
from ..core.cycle import next_period_start
from ..core.meta import META_CYCLE, META_ID, META_KIND, META_RANK, META_SCORE
from ..cycle_summary import tally_for_crawler
from ..history import HistoryStoreError, StoreLost
from ..history.redis_connection import cluster_mode, redis_from_settings
from ..settings import RecrawlSettingError, get
from . import serializer
from .base import CycleFrontier, SchedulerHost, Taken, recrawl_kind
from .outage import OutageClock, is_redis_error
from .queues import FifoQueue, queue_and_dupefilter
from .redis import RedisFrontier, SpiderKeys, spider_keys

logger = logging.getLogger("scrapy_recrawl.redis_scheduler")

# Seconds between this worker's status writes while nothing changes.
_STATUS_EVERY = 1.0
# Seconds between polls of the shared queues while other workers are busy.
_POLL = 0.5


class DistributedFrontier(CycleFrontier):
    """A spider's cycle, budget and queues in a Redis shared by many processes."""

    supports_probes = False
    many_processes = True

    def __init__(self, host: SchedulerHost) -> None:
        from scrapy_redis import defaults

        super().__init__(host)
        s = host.crawler.settings
        try:
            self.lock_seconds = get(
                s, "RECRAWL_REDIS_LOCK_SECONDS", (int, float), lambda v: v > 0, "seconds > 0"
            )
            self.worker_timeout = get(
                s,
                "RECRAWL_REDIS_WORKER_TIMEOUT",
                (int, float),
                lambda v: v > 0,
                "seconds > 0",
            )
            self.outage_seconds = get(
                s,
                "RECRAWL_REDIS_OUTAGE_SECONDS",
                (int, float),
                lambda v: v >= 0,
                "seconds >= 0",
            )
            # requests as data unless pickling is allowed on purpose (frontier/serializer.py)
            self.serializer = serializer.choose(s)
        except RecrawlSettingError as exc:
            logger.error("recrawl: %s", exc)
            raise
        self.persist = s.getbool("SCHEDULER_PERSIST", defaults.SCHEDULER_PERSIST)
        try:
            self.cluster = cluster_mode(s)
            # the key templates checked now (one hash tag per spider on a cluster; the
            # names are made at open()) and the queue / dupefilter classes (this
            # package's own on a cluster: cluster.py)
            spider_keys(s, "spider", self.cluster)
            self.queue_cls, self.redis_df_cls = queue_and_dupefilter(s, self.cluster)
            self.server, self.redis_location = redis_from_settings(s)
            # as scrapy-redis's scheduler does: fail now, not mid-crawl (and a single
            # Redis named where a cluster is, or the reverse, is said here)
            self.server.ping()
        except (RecrawlSettingError, HistoryStoreError) as exc:
            # a setting, a cluster named where a single Redis is (or the reverse:
            # RedisModeError), a cluster unreachable: said as it is, in one line
            logger.error("recrawl: %s", exc)
            raise
        except Exception as exc:  # noqa: BLE001 -- redis-py's errors, OSError
            where = getattr(self, "redis_location", None) or "REDIS_URL"
            message = (
                f"cannot reach the Redis at {where} (REDIS_URL, REDIS_HOST, "
                f"REDIS_PORT, REDIS_PARAMS) for RedisRecrawlScheduler: {exc}"
            )
            logger.error("recrawl: %s", message)
            raise HistoryStoreError(message) from exc
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._cycle_opened = 0.0
        self._offset = 0.0  # the Redis's clock less this process's: self.now() is the Redis's
        self._status_written = -_STATUS_EVERY  # time.monotonic(): the first write is due
        self._status_busy: bool | None = None
        self._others_busy_cache = (0.0, False)
        self._outage = OutageClock(self.redis_location, self.outage_seconds)
        self._held: list[Request] = []  # enqueued while Redis was away
        self._poke_call: Any = None
        self._local_df: Any = None
        self.keys: RedisFrontier | None = None
        self.names: SpiderKeys | None = None
        self.recrawls: Any = None
        self.newqs: Any = None
        self.backlog: Any = None  # new URLs from the store's frontier: taken first

    @property
    def shared(self) -> RedisFrontier:
        assert self.keys is not None, "the frontier is not open"
        return self.keys

    # -- life ------------------------------------------------------------------

    def open(self) -> None:
        host, spider = self.host, self.host.spider
        self.names = spider_keys(host.crawler.settings, spider.name, self.cluster)
        self.keys = RedisFrontier(
            self.server, self.names.scheduler, self.worker_id, lock_seconds=self.lock_seconds
        )
        self.newqs = self.queue_cls(
            server=self.server, spider=spider, key=self.names.queue, serializer=self.serializer
        )
        self.recrawls = FifoQueue(
            server=self.server,
            spider=spider,
            key=self.shared.key("recrawls"),
            serializer=self.serializer,
        )
        # the cycle's new URLs from earlier cycles (the store's frontier, in its order),
        # handed out before the cycle's own finds, so none waits for ever
        self.backlog = FifoQueue(
            server=self.server,
            spider=spider,
            key=self.shared.key("backlog"),
            serializer=self.serializer,
        )
        # Scrapy's own queues (and the dupefilter it built, kept for close()) hold
        # this process's continuations: redirects, retries, dont_filter requests.
        self._local_df = host.df
        with self.shared.lock():
            state = self.shared.state()
            open_cycle = (
                state
                and int(state.get("cycle", -1)) == host.store.cycle
                and not int(state.get("done", 0))
            )
            if open_cycle and not self.persist and not self._live_workers():
                # everyone left an unfinished cycle and nothing is kept between runs
                # (SCHEDULER_PERSIST off): end it, as a run without JOBDIR does
                self._end_cycle(int(state["cycle"]), "abandoned")
                open_cycle = False
            if open_cycle:
                self._join(state)
            else:
                self._open_cycle()
            self._write_status(busy=True, force=True)

    def close(self, reason: str) -> None:
        self.cancel_wake()
        if self._poke_call is not None and self._poke_call.active():
            self._poke_call.cancel()
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
        # Scrapy's close() closes the dupefilter: the local one, never the shared set
        self.host.df = self._local_df

    # -- requests in -------------------------------------------------------------

    def enqueue(self, request: Request) -> bool:
        try:
            self._flush_held()
            return self.host.enqueue_now(request)
        except HistoryStoreError as exc:
            self._hold(request, exc)
            return True
        except Exception as exc:  # noqa: BLE001 -- redis-py's errors
            if not is_redis_error(exc):
                raise
            self._hold(request, exc)
            return True

    def start_taken(self, request: Request) -> str | None:
        df = self.host.df  # the cycle's shared dupefilter
        fp = df.request_fingerprint(request)
        mine = self.shared.claim_start(self.cycle, fp)
        if mine is not None:
            return None if mine else "start_claimed_elsewhere"
        if self.shared.is_pick(self.cycle, fp):
            return "start_is_recrawl"  # its recrawl is queued this cycle
        return None

    def push_new(self, request: Request) -> None:
        self.newqs.push(request)
        self.host.inc_stat("scheduler/enqueued")
        self.host.inc_stat("scheduler/enqueued/redis")

    # -- requests out ----------------------------------------------------------------

    def next_request(self) -> Request | None:
        try:
            self._flush_held()
            if self.host.config.continuous:
                self._follow_cycle()
            request = super().next_request()
            self._outage.ok()
        except Exception as exc:  # noqa: BLE001
            self._redis_failed(exc)
            self._poke(1.0)
            return None
        if request is not None:
            self._write_status(busy=True)
        else:
            self._write_status(busy=not self.waiting and not self.host.quiet())
            if not self.waiting:  # between cycles the period's timer wakes the crawl
                self._poke(_POLL)
        return request

    def take(self, side: str, quota: int | None) -> Request | None:
        if not self.shared.reserve(side, self.budget.total, quota):
            return None
        if side == "recrawl":
            request = self._pop(self.recrawls)
        else:
            request = self._pop(self.backlog)
            if request is None:
                request = self._pop(self.newqs)
        if request is None:  # another process emptied it first: give the budget back
            self.shared.give_back(side)
        return request

    def _pop(self, queue: Any) -> Request | None:
        """The queue's next request; a value that is not one (checked as data by the
        serializer, frontier/serializer.py, never run) is off the queue then: it is
        said, counted, and the next one is taken."""
        while True:
            try:
                return queue.pop()  # type: ignore[no-any-return]
            except (ValueError, TypeError, KeyError) as exc:
                self.host.inc_stat("recrawl/unreadable_queue_values")
                logger.error(
                    "recrawl: a value of the queue %s in the Redis at %s is not a request, "
                    "dropped: %s",
                    queue.key,
                    self.redis_location,
                    exc,
                )

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
        return self.host.quiet() and not self._others_busy()

    def taken(self) -> Taken:
        taken = self.shared.taken()
        return Taken(taken.get("new", 0), taken.get("recrawl", 0))

    def budget_left(self) -> bool:
        total = self.budget.total
        return total is None or self.shared.taken().get("total", 0) < total

    def queued(self) -> int:
        try:
            return len(self.recrawls) + self.waiting_new() + len(self._held)
        except Exception:  # noqa: BLE001 -- Redis away: what we know locally
            return len(self._held)

    def waiting_new(self) -> int:
        """New URLs queued for the cycle, by all processes, not handed out yet."""
        return len(self.backlog) + len(self.newqs)

    def has_pending(self) -> bool:
        if self._held:
            return True
        try:
            if self.waiting:  # between cycles (continuous mode): idle until the period starts
                self._write_status(busy=False)
                self._outage.ok()
                return False
            pending = self.budget_left() and (len(self.recrawls) > 0 or self.waiting_new() > 0)
            if not pending:
                self._write_status(busy=not self.host.quiet())
                pending = self._others_busy()
            self._outage.ok()
            return pending
        except Exception as exc:  # noqa: BLE001
            return self._redis_failed(exc)

    # -- workers -----------------------------------------------------------------

    def _write_status(self, *, busy: bool, force: bool = False) -> None:
        # how often: this process's own steady clock; when seen: the Redis's (redis.py)
        now = time.monotonic()
        if not force and busy == self._status_busy and now - self._status_written < _STATUS_EVERY:
            return
        self.shared.write_status(self.cycle, busy)
        self._status_written, self._status_busy = now, busy

    def _workers(self) -> dict[str, dict[str, Any]]:
        return self.shared.workers(self.worker_timeout)

    def _live_workers(self) -> list[str]:
        return [w for w in self._workers() if w != self.worker_id]

    def _others_busy(self) -> bool:
        at, busy = self._others_busy_cache
        if time.monotonic() - at < 0.2:
            return busy
        busy = any(
            st["busy"] and st["cycle"] == self.cycle
            for w, st in self._workers().items()
            if w != self.worker_id
        )
        self._others_busy_cache = (time.monotonic(), busy)
        return busy

    def _poke(self, delay: float) -> None:
        """Ask the engine for the next request soon (its own heartbeat is 5 s)."""
        slot = getattr(self.host.engine(), "_slot", None)
        if slot is None or (self._poke_call is not None and self._poke_call.active()):
            return
        from twisted.internet import reactor

        clock: Any = reactor  # the installed reactor (typed as the module)
        self._poke_call = clock.callLater(delay, slot.nextcall.schedule)

    # -- cycles ------------------------------------------------------------------

    def _cycle_df(self, cycle: int) -> Any:
        return self.redis_df_cls(
            self.server,
            key=self._df_key(cycle),
            debug=self.host.crawler.settings.getbool("DUPEFILTER_DEBUG"),
        )

    def _df_key(self, cycle: int) -> str:
        assert self.names is not None, "the frontier is not open"
        return self.names.dupefilter_of(cycle)

    def now(self) -> float:
        """The Redis's time (as of the last cycle adopted: this clock plus its offset)."""
        return super().now() + self._offset

    def _adopt(self, state: dict[str, str]) -> None:
        # each cycle opened, joined or adopted: still the history this process opened?
        check_epoch = getattr(self.host.store, "check_epoch", None)
        if check_epoch is not None:
            check_epoch()
        self.cycle = int(state["cycle"])
        total, new = int(state["total"]), int(state["new"])
        monitor = int(state.get("monitor", 0))  # the sample, on top of the budget's pages
        self.budget = Budget(None if total < 0 else total, None if new < 0 else new, monitor)
        # the periods are kept in the Redis's time, one clock for every process
        self._sync_clock()
        self._cycle_opened = float(state["opened"])
        self.started = self.monotonic() - max(0.0, self.now() - self._cycle_opened)
        self.opened_at = self._cycle_opened
        self.period_start = float(state.get("period_start", self._cycle_opened))
        self.waiting = False
        self.host.df = self._cycle_df(self.cycle)
        self._others_busy_cache = (0.0, False)

    def _sync_clock(self) -> float:
        """Read the Redis's clock: the periods' offset (to the scheduler's clock) and the
        crawl's wall clock (visits, summaries, a cycle's planning time: cycle_summary.py)
        follow it, whatever this machine's own clock says. Returns the Redis's time."""
        now = self.shared.now()
        self._offset = now - super().now()
        tally = tally_for_crawler(self.host.crawler)
        tally.clock_offset = now - float(tally.clock())
        return now

    def _join(self, state: dict[str, str]) -> None:
        self._adopt(state)
        self.cycles_run += 1
        pending = len(self.recrawls) + self.waiting_new()
        if pending:
            # scrapy-redis's words, so its users recognise a shared queue being picked up
            self.host.spider.log(f"Resuming crawl ({pending} requests scheduled)")
        stats = self.host.crawler.stats
        if stats is not None:
            stats.set_value("recrawl/cycle", self.cycle)
            stats.set_value("recrawl/joined_cycle", self.cycle)
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
        plan = self.host.plan_cycle()
        self.cycles_run += 1
        self.cycle, budget = plan.cycle, plan.budget
        self.host.df = self._cycle_df(plan.cycle)
        pushed = self._push_recrawls(plan.selection.ids, plan.selection.scores)
        for d in self.host.store.pop_frontier(plan.new_quota):
            request = self.host.request_from_frontier(d)
            if request is not None:
                self.backlog.push(request)
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
        self.host.log_cycle(plan, pushed)

    def _push_recrawls(self, ids: np.ndarray, scores: np.ndarray) -> int:
        """Push the stored request dicts, best first, in batches; mark them seen."""
        store, df, cycle = self.host.store, self.host.df, self.cycle
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
                    self.host.inc_stat("recrawl/unreadable_stored_requests")
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
                yield d, df.request_fingerprint(request)

        return self.shared.push_recrawls(self.recrawls, cycle, df.key, entries())

    def _follow_cycle(self) -> None:
        """Continuous mode: adopt a cycle another process has rolled over to."""
        state = self.shared.state()
        if state and int(state["cycle"]) != self.cycle:
            self._adopt_rolled_over(state)

    def _adopt_rolled_over(self, state: dict[str, str]) -> None:
        self.summarize_cycle()  # another process rolled over: ours has ended (once)
        self._adopt(state)
        self.cycles_run += 1
        stats = self.host.crawler.stats
        if stats is not None:
            stats.set_value("recrawl/cycle", self.cycle)

    def maybe_roll_over(self, *, check_work: bool = True) -> None:
        if not check_work:  # from next_request(), whose own guard waits out an outage
            super().maybe_roll_over(check_work=False)
            return
        # from spider_idle (scheduler._on_idle), outside that guard: Redis away while the
        # cycle rolls over is an outage to wait out (RECRAWL_REDIS_OUTAGE_SECONDS), not an
        # error escaping the idle handler, after which Scrapy logged a traceback and
        # closed the spider as "finished", exit 0, whatever RECRAWL_ON_STORE_LOSS said
        try:
            super().maybe_roll_over(check_work=True)
        except Exception as exc:  # noqa: BLE001
            self._redis_failed(exc)
            self._poke(1.0)

    def roll_over(self, period_start: float) -> None:
        """The next period has started (by this process's reckoning): the first process to
        get the lock checks it by the Redis's clock, ends the cycle and opens the next, once
        for all; the others adopt it."""
        lock = self.shared.lock()
        if not lock.acquire(blocking=False):
            self._poke(_POLL)  # another process is rolling over: adopt its cycle soon
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
            lock.release()

    def _leave(self, reason: str) -> None:
        """Deregister; the last process out of a finished cycle closes it."""
        with self.shared.lock():
            self.shared.deregister()
            if self._live_workers():
                return
            state = self.shared.state()
            if not state or int(state.get("cycle", -1)) != self.cycle or int(state.get("done", 0)):
                return
            drained = not self.budget_left() or (
                len(self.recrawls) == 0 and self.waiting_new() == 0 and not self._held
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
        left = list(iter(lambda: self._pop(self.backlog), None))
        left += list(iter(lambda: self._pop(self.newqs), None))
        left += [r for r in self._held if not r.meta.get("is_start_request")]
        self._held = []
        kept = self.keep_for_later(left)
        self.shared.close_cycle(cycle, self._df_key(cycle))
        logger.info("recrawl cycle %d closed (%s): %d new URLs kept for later", cycle, reason, kept)

    # -- Redis going away (frontier/outage.py) -----------------------------------

    def _redis_failed(self, exc: BaseException) -> bool:
        """Keep the spider open while Redis may come back; True: 'still pending'."""
        if isinstance(exc, StoreLost):
            return False  # no outage: the history is gone, and the crawl stops (epoch.py)
        verdict = self._outage.failed(exc)
        if verdict == "new":
            self.host.inc_stat("recrawl/redis_outages")
        if verdict != "over":
            return True
        engine = self.host.engine()
        if engine is not None and engine.spider is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason="recrawl_redis_unavailable"))
        return False

    def _hold(self, request: Request, exc: BaseException) -> None:
        if self._outage.since is None:
            self._redis_failed(exc)
        self._held.append(request)
        self._poke(1.0)

    def _flush_held(self) -> None:
        while self._held:
            self.host.enqueue_now(self._held[0])
            self._held.pop(0)
