"""The recrawl scheduler with its frontier in Redis, shared by many ``scrapy crawl`` s.

``SCHEDULER = "scrapy_recrawl.RedisRecrawlScheduler"`` (plus the add-on or the
middleware) on every machine, all pointing at one Redis (``REDIS_URL``), and
the processes share one history store, one recrawl queue, one new-URL queue,
one dupefilter and one budget. docs/distributed.md has the whole story; in short:

* **Queues and dupefilter are scrapy-redis's own classes** (new URLs in
  ``SCHEDULER_QUEUE_CLASS``, recrawls in a ``FifoQueue``, a dupefilter set per
  cycle); every Redis command is in :mod:`scrapy_recrawl.frontier.redis`.
* **A cycle is opened once.** The first process to start takes a lock with an
  expiry (``RECRAWL_REDIS_LOCK_SECONDS``), advances the cycle counter, scores the
  known URLs and pushes the top-k and the frontier's share once; the others wait
  for the lock and *join* the open cycle. The last process to leave a finished
  cycle (queues drained or budget handed out) closes it, spilling leftover new
  URLs into the store's frontier; the next ``scrapy crawl`` opens the next one.
* **The budget is shared**: every budgeted request is reserved by one Lua
  script against counters in Redis before it is popped, so N processes together
  never hand out more than the cycle's budget.
* **Start requests** are claimed per cycle: one process fetches each, and none
  does when the cycle's recrawls already include its URL.
* A process whose queues are empty stays open while another process in the
  same cycle is still busy (it may discover more URLs), polling twice a second.
* If Redis goes away mid-crawl, the scheduler keeps the spider open and retries
  for ``RECRAWL_REDIS_OUTAGE_SECONDS``, then closes it with the reason
  ``recrawl_redis_unavailable`` and an error naming the Redis URL.
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
from scrapy import Request, Spider
from scrapy.core.scheduler import Scheduler
from scrapy.crawler import Crawler
from scrapy.utils.misc import load_object
from twisted.internet.defer import Deferred

from .core.budget import Budget
from .core.cycle import side_order
from .core.meta import META_CYCLE, META_ID, META_RANK, META_SCORE
from .frontier.outage import OutageClock, is_redis_error
from .frontier.redis import RedisFrontier
from .history import HistoryStoreError
from .history.redis_connection import redis_from_settings
from .scheduler import RecrawlScheduler, _is_new, _is_start
from .settings import RecrawlSettingError, get

logger = logging.getLogger(__name__)

# Seconds between this worker's status writes while nothing changes.
_STATUS_EVERY = 1.0
# Seconds between polls of the shared queues while other workers are busy.
_POLL = 0.5


class RedisRecrawlScheduler(RecrawlScheduler):
    """RecrawlScheduler whose cycles, budget and queues live in Redis (module docstring)."""

    manages_recrawl_cycles = True
    #: tells open_store() to default RECRAWL_STORE to the Redis of REDIS_URL
    recrawl_store_backend = "redis"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisRecrawlScheduler:
        scheduler = super().from_crawler(crawler)
        assert isinstance(scheduler, RedisRecrawlScheduler)
        scheduler._configure_redis(crawler)
        return scheduler

    # -- set-up ------------------------------------------------------------

    def _configure_redis(self, crawler: Crawler) -> None:
        from scrapy_redis import defaults

        s = crawler.settings
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
            self.key_template = get(s, "RECRAWL_REDIS_SCHEDULER_KEY", str)
        except RecrawlSettingError as exc:
            logger.error("recrawl: %s", exc)
            raise
        self.persist = s.getbool("SCHEDULER_PERSIST", defaults.SCHEDULER_PERSIST)
        self.queue_key_template = s.get("SCHEDULER_QUEUE_KEY") or defaults.SCHEDULER_QUEUE_KEY
        self.queue_cls = load_object(
            s.get("SCHEDULER_QUEUE_CLASS") or defaults.SCHEDULER_QUEUE_CLASS
        )
        self.dupefilter_key_template = (
            s.get("SCHEDULER_DUPEFILTER_KEY") or defaults.SCHEDULER_DUPEFILTER_KEY
        )
        df_path = s.get("SCHEDULER_DUPEFILTER_CLASS")
        if not df_path and "scrapy_redis" in str(s.get("DUPEFILTER_CLASS") or ""):
            df_path = s.get("DUPEFILTER_CLASS")
        self.redis_df_cls = load_object(df_path or defaults.SCHEDULER_DUPEFILTER_CLASS)
        serializer = s.get("SCHEDULER_SERIALIZER")
        if isinstance(serializer, str):
            import importlib

            serializer = importlib.import_module(serializer)
        self.serializer = serializer
        self.server, self.redis_location = redis_from_settings(s)
        try:
            self.server.ping()  # as scrapy-redis's scheduler does: fail now, not mid-crawl
        except Exception as exc:  # noqa: BLE001 -- redis-py's errors, OSError
            message = (
                f"cannot reach the Redis at {self.redis_location} (REDIS_URL, REDIS_HOST, "
                f"REDIS_PORT, REDIS_PARAMS) for RedisRecrawlScheduler: {exc}"
            )
            logger.error("recrawl: %s", message)
            raise HistoryStoreError(message) from exc
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._cycle = 0
        self._cycle_opened = 0.0
        self._status_written = 0.0
        self._status_busy: bool | None = None
        self._others_busy_cache = (0.0, False)
        self._outage = OutageClock(self.redis_location, self.outage_seconds)
        self._held: list[Request] = []  # enqueued while Redis was away
        self._poke_call: Any = None
        self._local_df: Any = None
        self._joined = False

    def _mq(self) -> Any:
        # Scrapy's default DownloaderAwarePriorityQueue needs crawler.engine, which a
        # scheduler built and opened outside a crawl (scrapy-redis's SchedulerTest)
        # has not got: those get the plain priority queue for their continuations.
        try:
            return super()._mq()
        except RuntimeError:
            from scrapy.pqueues import ScrapyPriorityQueue

            self.pqclass = ScrapyPriorityQueue
            return super()._mq()

    def _engine(self) -> Any:
        # Crawler.engine raises RuntimeError (not AttributeError) before the crawl starts
        try:
            return self.crawler.engine if self.crawler is not None else None
        except RuntimeError:
            return None

    # -- keys --------------------------------------------------------------

    def _key(self, name: str) -> str:
        return self.frontier.key(name)

    @property
    def _shared_df(self) -> Any:  # the cycle's scrapy-redis dupefilter, once adopted
        return self.df

    def _cycle_df(self, cycle: int) -> Any:
        key = f"{self.dupefilter_key_template % {'spider': self.spider.name}}:{cycle}"
        assert self.crawler is not None
        return self.redis_df_cls(
            self.server, key=key, debug=self.crawler.settings.getbool("DUPEFILTER_DEBUG")
        )

    # -- Scrapy's scheduler contract ----------------------------------------

    def open(self, spider: Spider) -> Deferred[None] | None:
        from scrapy_redis.queue import FifoQueue

        # Scrapy's own queues (and the dupefilter it built, kept for close()) hold
        # this process's continuations: redirects, retries, dont_filter requests.
        result = Scheduler.open(self, spider)
        assert self.crawler is not None
        from .history import store_for_crawler

        self._store = store_for_crawler(self.crawler)
        self._open_plugins()
        if self.prober is not None:
            message = (
                "loop-time probes (RECRAWL_PROBE, the `due` terminal) need RecrawlScheduler: "
                "RedisRecrawlScheduler does not run them yet (docs/baskets.md)"
            )
            logger.error("recrawl: %s", message)
            raise RecrawlSettingError(message)
        self.frontier = RedisFrontier(
            self.server,
            self.key_template % {"spider": spider.name},
            self.worker_id,
            lock_seconds=self.lock_seconds,
        )
        self.newqs = self.queue_cls(
            server=self.server,
            spider=spider,
            key=self.queue_key_template % {"spider": spider.name},
            serializer=self.serializer,
        )
        self._recrawls = FifoQueue(  # type: ignore[assignment]
            server=self.server,
            spider=spider,
            key=self._key("recrawls"),
            serializer=self.serializer,
        )
        self._local_df = self.df
        if self.config.continuous:
            from scrapy import signals

            self.crawler.signals.connect(self._on_idle, signal=signals.spider_idle)
        with self._lock():
            state = self._state()
            open_cycle = (
                state
                and int(state.get("cycle", -1)) == self.store.cycle
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
        return result

    def close(self, reason: str) -> Deferred[None] | None:
        if self._poke_call is not None and self._poke_call.active():
            self._poke_call.cancel()
        try:
            self._leave(reason)
        except Exception as exc:  # noqa: BLE001 -- Redis gone: leave the state as it is
            logger.error(
                "recrawl: could not leave cycle %d cleanly in the Redis at %s: %s",
                self._cycle,
                self.redis_location,
                exc,
            )
        # Scrapy's close() closes the dupefilter: the local one, never the shared set
        self.df = self._local_df
        return Scheduler.close(self, reason)

    def __len__(self) -> int:
        local = len(self.mqs) + (len(self.dqs) if self.dqs is not None else 0)
        try:
            return local + len(self._recrawls) + len(self.newqs) + len(self._held)
        except Exception:  # noqa: BLE001 -- Redis away: what we know locally
            return local + len(self._held)

    def has_pending_requests(self) -> bool:
        if len(self.mqs) > 0 or (self.dqs is not None and len(self.dqs) > 0) or self._held:
            return True
        try:
            pending = self._budget_left() and (len(self._recrawls) > 0 or len(self.newqs) > 0)
            if not pending:
                self._write_status(busy=not self._quiet())
                pending = self._others_busy()
            self._outage.ok()
            return pending
        except Exception as exc:  # noqa: BLE001
            return self._redis_failed(exc)

    def enqueue_request(self, request: Request) -> bool:
        try:
            self._flush_held()
            return self._enqueue(request)
        except HistoryStoreError as exc:
            self._hold(request, exc)
            return True
        except Exception as exc:  # noqa: BLE001 -- redis-py's errors
            if not is_redis_error(exc):
                raise
            self._hold(request, exc)
            return True

    def _enqueue(self, request: Request) -> bool:
        if _is_start(request):
            fp = self._shared_df.request_fingerprint(request)
            mine = self.frontier.claim_start(self._cycle, fp)
            if mine is not None:
                if not mine:
                    self._inc("recrawl/start_claimed_elsewhere")
                    return False
            elif self.frontier.seen(self._shared_df.key, fp):
                self._inc("recrawl/start_is_recrawl")  # its recrawl is queued this cycle
                return False
        if not _is_new(request):
            # a continuation: this process's own Scrapy queues, through the shared dupefilter
            return Scheduler.enqueue_request(self, request)
        if not self._admit_new(request):
            return False
        self.newqs.push(request)
        self._inc("scheduler/enqueued")
        self._inc("scheduler/enqueued/redis")
        self._inc("recrawl/enqueued_new")
        return True

    def next_request(self) -> Request | None:
        request = Scheduler.next_request(self)  # continuations first, never budgeted
        if request is not None:
            return request
        try:
            self._flush_held()
            if self.config.continuous:
                self._follow_cycle()
                self._maybe_roll_over()
            request = self._next_budgeted() if self._budget_left() else None
            self._outage.ok()
        except Exception as exc:  # noqa: BLE001
            self._redis_failed(exc)
            self._poke(1.0)
            return None
        if request is not None:
            self._inc("scheduler/dequeued")
            self._write_status(busy=True)
        else:
            self._write_status(busy=not self._quiet())
            self._poke(_POLL)
        return request

    # -- the shared budget -------------------------------------------------------

    def _taken(self) -> dict[str, int]:
        return self.frontier.taken()

    def _budget_left(self) -> bool:
        total = self.budget.total
        return total is None or self._taken().get("total", 0) < total

    def _take(self, side: str, quota: int | None) -> Request | None:
        if not self.frontier.reserve(side, self.budget.total, quota):
            return None
        queue = self._recrawls if side == "recrawl" else self.newqs
        request = queue.pop()
        if request is None:  # another process emptied it first: give the budget back
            self.frontier.give_back(side)
        return request

    def _next_budgeted(self) -> Request | None:
        taken = self._taken()
        order = side_order(
            self.budget,
            taken.get("new", 0),
            taken.get("recrawl", 0),
            # nothing in flight anywhere can discover more new URLs
            quiet=lambda: self._quiet() and not self._others_busy(),
        )
        for side, quota in order:
            request = self._take(side, quota)
            if request is None:
                continue
            if side == "new":
                request.meta[META_CYCLE] = self._cycle
                self._inc("recrawl/fetched_new")
            return request
        return None

    # -- workers -----------------------------------------------------------------

    def _write_status(self, *, busy: bool, force: bool = False) -> None:
        now = time.time()
        if not force and busy == self._status_busy and now - self._status_written < _STATUS_EVERY:
            return
        self.frontier.write_status(self._cycle, busy, now)
        self._status_written, self._status_busy = now, busy

    def _workers(self) -> dict[str, dict[str, Any]]:
        return self.frontier.workers(self.worker_timeout)

    def _live_workers(self) -> list[str]:
        return [w for w, st in self._workers().items() if w != self.worker_id]

    def _others_busy(self) -> bool:
        at, busy = self._others_busy_cache
        if time.monotonic() - at < 0.2:
            return busy
        busy = any(
            st["busy"] and st["cycle"] == self._cycle
            for w, st in self._workers().items()
            if w != self.worker_id
        )
        self._others_busy_cache = (time.monotonic(), busy)
        return busy

    def _poke(self, delay: float) -> None:
        """Ask the engine for the next request soon (its own heartbeat is 5 s)."""
        slot = getattr(self._engine(), "_slot", None)
        if slot is None or (self._poke_call is not None and self._poke_call.active()):
            return
        from twisted.internet import reactor

        clock: Any = reactor  # the installed reactor (typed as the module)
        self._poke_call = clock.callLater(delay, slot.nextcall.schedule)

    # -- cycles ------------------------------------------------------------------

    def _lock(self) -> Any:
        return self.frontier.lock()

    def _state(self) -> dict[str, str]:
        return self.frontier.state()

    def _adopt(self, state: dict[str, str]) -> None:
        self._cycle = int(state["cycle"])
        total, new = int(state["total"]), int(state["new"])
        self.budget = Budget(None if total < 0 else total, None if new < 0 else new)
        self._cycle_opened = float(state["opened"])
        self.cycle_started = time.monotonic() - (time.time() - self._cycle_opened)
        self.df = self._cycle_df(self._cycle)
        self._others_busy_cache = (0.0, False)

    def _join(self, state: dict[str, str]) -> None:
        self._adopt(state)
        self._cycles_run += 1
        self._joined = True
        pending = len(self._recrawls) + len(self.newqs)
        if pending:
            # scrapy-redis's words, so its users recognise a shared queue being picked up
            self.spider.log(f"Resuming crawl ({pending} requests scheduled)")
        if self.stats is not None:
            self.stats.set_value("recrawl/cycle", self._cycle)
            self.stats.set_value("recrawl/joined_cycle", self._cycle)
        logger.info(
            "recrawl cycle %d joined (opened by another process): budget %s, %d requests queued",
            self._cycle,
            self.budget.total,
            pending,
        )

    def _open_cycle(self) -> None:
        """Advance the cycle counter, score, push the top-k and the frontier's share:
        once, by the process holding the lock."""
        self.frontier.forget_recrawls()  # from a cycle that was never closed
        plan = self._plan_cycle()
        self._cycles_run += 1
        cycle, budget = plan.cycle, plan.budget
        self._cycle = cycle
        self.df = self._cycle_df(cycle)
        self._selected = plan.selection.ids
        pushed = self._push_recrawls(plan.selection.ids, plan.selection.scores, cycle)
        for d in self.store.pop_frontier(plan.new_quota):
            self._push_new(d)
        now = time.time()
        self.frontier.open_cycle(
            {
                "cycle": cycle,
                "total": -1 if budget.total is None else budget.total,
                "new": -1 if budget.new is None else budget.new,
                "opened": repr(now),
                "opened_by": self.worker_id,
                "done": 0,
                "scheduled": pushed,
            }
        )
        self._adopt(self._state())
        if self.stats is not None:
            self.stats.inc_value("recrawl/cycles_opened")
        self._cycle_stats(plan, pushed)

    def _push_recrawls(self, ids: np.ndarray, scores: np.ndarray, cycle: int) -> int:
        """Push the stored request dicts, best first, in batches; mark them seen."""
        queue = self._recrawls
        dicts = self.store.requests(ids)
        missing = [i for i, d in enumerate(dicts) if d is None]
        if missing:
            urls = self.store.urls(ids[missing])
            for i, url in zip(missing, urls, strict=True):
                dicts[i] = Request(url).to_dict()

        def entries() -> Iterator[tuple[dict[str, Any], str]]:
            for rank, (url_id, d) in enumerate(zip(ids.tolist(), dicts, strict=True)):
                assert d is not None
                meta = {META_CYCLE: cycle, META_ID: int(url_id), META_RANK: rank}
                d = {
                    **d,
                    "meta": {**(d.get("meta") or {}), **meta, META_SCORE: float(scores[rank])},
                }
                request = Request(
                    d["url"], method=d.get("method", "GET"), body=d.get("body") or b""
                )
                yield d, self._shared_df.request_fingerprint(request)

        return self.frontier.push_recrawls(queue, self._shared_df.key, entries())

    def _follow_cycle(self) -> None:
        """Continuous mode: adopt a cycle another process has rolled over to."""
        state = self._state()
        if state and int(state["cycle"]) != self._cycle:
            self._adopt(state)
            self._cycles_run += 1
            if self.stats is not None:
                self.stats.set_value("recrawl/cycle", self._cycle)

    def _maybe_roll_over(self) -> None:
        if not self._cycle_over():
            return
        lock = self._lock()
        if not lock.acquire(blocking=False):
            return  # another process is rolling over: adopt its cycle next time
        try:
            state = self._state()
            if int(state.get("cycle", -1)) != self._cycle:
                self._adopt(state)  # rolled over already, by someone else
                self._cycles_run += 1
                return
            self._end_cycle(self._cycle, "rolled over", spill=True)
            self._open_cycle()
        finally:
            lock.release()

    def _leave(self, reason: str) -> None:
        """Deregister; the last process out of a finished cycle closes it."""
        with self._lock():
            self.frontier.deregister()
            if self._live_workers():
                return
            state = self._state()
            if not state or int(state.get("cycle", -1)) != self._cycle or int(state.get("done", 0)):
                return
            drained = not self._budget_left() or (
                len(self._recrawls) == 0 and len(self.newqs) == 0 and not self._held
            )
            if (reason == "finished" and drained) or not self.persist:
                self._end_cycle(self._cycle, reason)
            else:
                logger.info(
                    "recrawl cycle %d left open (%s, SCHEDULER_PERSIST): the next run resumes it",
                    self._cycle,
                    reason,
                )

    def _end_cycle(self, cycle: int, reason: str, spill: bool = True) -> None:
        """Close ``cycle``: new URLs left over go to the frontier, the rest is dropped."""
        items = []
        if spill:
            while (request := self.newqs.pop()) is not None:
                try:
                    d = request.to_dict(spider=self.spider)
                except ValueError:
                    self._inc("recrawl/frontier_unserializable")
                    continue
                items.append((self.fingerprinter.fingerprint(request), d, request.priority))
            for request in self._held:
                if not request.meta.get("is_start_request"):
                    d = request.to_dict(spider=self.spider)
                    items.append((self.fingerprinter.fingerprint(request), d, request.priority))
            self._held = []
        if items:
            self._inc("recrawl/frontier_saved", self.store.push_frontier(items))
        df_key = f"{self.dupefilter_key_template % {'spider': self.spider.name}}:{cycle}"
        self.frontier.close_cycle(cycle, df_key)
        logger.info(
            "recrawl cycle %d closed (%s): %d new URLs kept for later", cycle, reason, len(items)
        )

    # -- Redis going away (frontier/outage.py) -----------------------------------

    def _redis_failed(self, exc: BaseException) -> bool:
        """Keep the spider open while Redis may come back; True: 'still pending'."""
        verdict = self._outage.failed(exc)
        if verdict == "new":
            self._inc("recrawl/redis_outages")
        if verdict != "over":
            return True
        engine = self._engine()
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
            request = self._held[0]
            self._enqueue(request)
            self._held.pop(0)
