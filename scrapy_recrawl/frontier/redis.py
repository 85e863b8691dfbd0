"""The shared frontier of RedisRecrawlScheduler: every Redis command the scheduler sends.

Keys under ``RECRAWL_REDIS_SCHEDULER_KEY`` (``%(spider)s:recrawl``), one set per spider:

``{s}:state``     hash: the open cycle, its budget, who opened it and when (the Redis's
                  time), the start of its period (continuous mode), whether it is done
``{s}:taken``     hash: budgeted requests handed out this cycle (total, new, recrawl)
``{s}:workers``   hash: worker id -> JSON status (cycle, busy, last seen by the
                  Redis's clock: liveness never reads a machine's own clock; the one
                  rule of history/redis_liveness.py)
``{s}:lock``      the lock under which a cycle is opened, rolled over or left
``{s}:epoch``     the history store's epoch (history/epoch.py) the cycle belongs to:
                  every write here is refused unless it is the writer's (the fence)
``{s}:recrawls``  the cycle's scored recrawls (a scrapy-redis FifoQueue)
``{s}:backlog``   new URLs the cycle took from the store's frontier (a FifoQueue),
                  handed out before the new URLs found in the cycle
``{s}:starts:<cycle>``  hash: start-request fingerprint -> the worker that claimed it
``{s}:picks:<cycle>``   set: fingerprints of the cycle's recrawls (monitoring sample
                  included), which a start request of the same URL leaves to them
``{s}:fetched:<cycle>`` hash: fingerprint of each URL handed out this cycle, by any
                  process -> ``s`` (only by the spider's own dont_filter requests) or
                  ``x`` (each URL at most once per cycle)

New URLs go to scrapy-redis's queue (``SCHEDULER_QUEUE_KEY``) and duplicates
are filtered in a set per cycle (``SCHEDULER_DUPEFILTER_KEY`` + ``:<cycle>``).
The scheduler decides (core/cycle.py); this class only keeps the state.

On a Redis Cluster (``RECRAWL_REDIS_CLUSTER``) the spider's name in every key is a
hash tag, ``{<spider>}`` (:func:`spider_keys`): ``{site}:recrawl:state``,
``{site}:requests``, ``{site}:dupefilter:<cycle>`` ... all hash to one slot, so each
script, each MULTI/EXEC pipeline and the lock touch that one slot (one master).
Every script takes all its keys in ``KEYS``, none is built from ``ARGV``.

**The fence.** ``scrapy recrawl-reset`` deletes these keys and gives the store a new
epoch; a crawl still running then must not re-create them (a queue, a dupefilter,
a workers hash with no owner, which the next cycle would read as its own). So every
command that can create a key here -- the queues' pushes, the dupefilter's adds,
the cycle state, the budget counters, the claims, the fetched URLs, the workers'
statuses -- runs in a script that first compares ``{s}:epoch`` with the epoch this
process took at open (``scrapy_recrawl/lua/frontier_fence.lua``, before each of the
frontier's scripts; the queues and the dupefilter get a client that sends their
writes so: :class:`FencedClient`). A refused write writes nothing;
the frontier then checks the store's epoch (the crawl stops with one line: the
store was reset or lost) and counts it (``recrawl/frontier_writes_refused``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .. import lua
from ..history import HistoryStoreError
from ..history.ownership import for_spider
from ..history.redis_liveness import (
    NOW_LUA,
    STAMP_LUA,
    seen_within,
    server_time,
    stamp_args,
    worker_timeout,
)
from ..history.redis_schema import LOST_ERROR

#: The commands that can create a key, as the queues, the dupefilter and this module
#: send them: behind the fence (scrapy_recrawl/lua/frontier_command.lua runs one).
FENCED_COMMANDS = frozenset(
    {"LPUSH", "RPUSH", "ZADD", "SADD", "HSET", "HSETNX", "HINCRBY", "SET", "INCR", "INCRBY"}
)


def fenced_script(name: str) -> str:
    """Script ``name`` (scrapy_recrawl/lua/) behind the fence: ``frontier_fence.lua``
    first, which checks the epoch and takes its own key and argument off KEYS and ARGV."""
    return lua.load("frontier_fence") + lua.load(name)


@dataclass(frozen=True)
class SpiderKeys:
    """A spider's key names: the scheduler's prefix, the new-URL queue, the dupefilter
    prefix (the cycle's set is ``<dupefilter>:<cycle>``)."""

    scheduler: str
    queue: str
    dupefilter: str

    def dupefilter_of(self, cycle: int) -> str:
        return f"{self.dupefilter}:{cycle}"


def spider_keys(settings: Any, spider: str, cluster: bool) -> SpiderKeys:
    """The keys RedisRecrawlScheduler uses for ``spider`` (``RECRAWL_REDIS_SCHEDULER_KEY``,
    ``SCHEDULER_QUEUE_KEY``, ``SCHEDULER_DUPEFILTER_KEY``, ``%(spider)s`` filled in).

    ``cluster``: the spider's name is written as the hash tag ``{<spider>}``, so all the
    keys share one slot; templates that do not would split them over slots, and are
    refused (one line naming the settings)."""
    from scrapy_redis import defaults

    from ..history.redis_connection import CLUSTER_SETTING
    from ..settings import RecrawlSettingError, get

    name = "{" + spider + "}" if cluster else spider
    keys = SpiderKeys(
        scheduler=for_spider(
            get(settings, "RECRAWL_REDIS_SCHEDULER_KEY", str), "RECRAWL_REDIS_SCHEDULER_KEY", name
        ),
        queue=(settings.get("SCHEDULER_QUEUE_KEY") or defaults.SCHEDULER_QUEUE_KEY)
        % {"spider": name},
        dupefilter=(settings.get("SCHEDULER_DUPEFILTER_KEY") or defaults.SCHEDULER_DUPEFILTER_KEY)
        % {"spider": name},
    )
    if cluster:
        from redis.crc import key_slot

        slots = {key_slot(k.encode()) for k in (keys.scheduler, keys.queue, keys.dupefilter)}
        if len(slots) > 1:
            raise RecrawlSettingError(
                f"RECRAWL_REDIS_SCHEDULER_KEY={keys.scheduler!r}, SCHEDULER_QUEUE_KEY="
                f"{keys.queue!r} and SCHEDULER_DUPEFILTER_KEY={keys.dupefilter!r} must share "
                f"one hash tag on a Redis Cluster ({CLUSTER_SETTING}): keep %(spider)s in each "
                "(it becomes {<spider>}) and no other {...}"
            )
    return keys


class RedisFrontier:
    """A spider's shared cycle state in one Redis (module docstring)."""

    def __init__(self, server: Any, key: str, worker_id: str, *, lock_seconds: float) -> None:
        self.server = server
        self.skey = key
        self.worker_id = worker_id
        self.lock_seconds = lock_seconds
        self._reserve = server.register_script(fenced_script("frontier_reserve"))
        self._fetched = server.register_script(fenced_script("frontier_fetched"))
        self._now = server.register_script(NOW_LUA)
        # a status stamped by the Redis's clock, by the one liveness rule (redis_liveness)
        self._status = server.register_script(lua.load("frontier_fence") + STAMP_LUA)
        self._command = server.register_script(fenced_script("frontier_command"))
        #: the store's epoch this process writes under (take_epoch(), at open)
        self.epoch: str | None = None
        #: called with what the epoch key holds when a write was refused: True to
        #: write again (the epoch was taken anew: a fresh history, "continue"); it
        #: raises otherwise (history/epoch.py's StoreLost)
        self.on_refused: Callable[[str | None], bool] | None = None
        #: writes refused by the fence (the stat recrawl/frontier_writes_refused)
        self.refused = 0

    def key(self, name: str) -> str:
        return f"{self.skey}:{name}"

    # -- the fence (module docstring) ------------------------------------------

    def take_epoch(self, epoch: str | None) -> str:
        """Write under ``epoch`` (the history store's; None: a store without one, whose
        frontier gets a token of its own, the first process's): called at open, under the
        cycle lock. The store's epoch is the one truth: a key left by an earlier history
        (a store reset without its frontier) is overwritten."""
        key = self.key("epoch")
        if epoch is None:
            self.server.set(key, uuid.uuid4().hex, nx=True)
            raw = self.server.get(key)
            epoch = raw.decode() if isinstance(raw, bytes) else str(raw)
        else:
            self.server.set(key, epoch)
        self.epoch = epoch
        return epoch

    def fenced(self, command: str, key: str, *args: Any) -> Any:
        """``command key args...`` if the frontier is still this process's (its epoch
        key holds the epoch taken at open); refused otherwise (:meth:`_refused`)."""
        return self._guarded(self._command, [key], [command.upper(), *args])

    def _guarded(self, script: Any, keys: list[Any], args: list[Any]) -> Any:
        import redis

        for _ in range(2):
            try:
                return script(keys=[*keys, self.key("epoch")], args=[*args, self.epoch or ""])
            except redis.ResponseError as exc:
                if not self._refused(exc):
                    raise
        return None  # unreachable: _refused raises on the second refusal

    def _transaction(self, build: Callable[[Any], None]) -> list[Any]:
        """A MULTI/EXEC pipeline that ``build`` fills, its writes behind the fence
        (:meth:`pipe_fenced`): refused as a whole when the frontier is not this process's."""
        import redis

        for _ in range(2):
            pipe = self._pipeline()
            build(pipe)
            try:
                return list(pipe.execute())
            except redis.ResponseError as exc:
                if not self._refused(exc):
                    raise
        return []  # unreachable: _refused raises on the second refusal

    def _pipeline(self) -> Any:
        """A MULTI/EXEC pipeline for the spider's keys. On a cluster, whose pipelines
        refuse scripts, it is the pipeline of the node of the spider's slot (every key
        here shares it: spider_keys)."""
        if hasattr(self.server, "get_node_from_key"):
            node = self.server.get_node_from_key(self.key("epoch"))
            return node.redis_connection.pipeline(transaction=True)
        return self.server.pipeline(transaction=True)

    def pipe_fenced(self, pipe: Any, command: str, key: str, *args: Any) -> None:
        """Add a fenced ``command key args...`` to ``pipe`` (in :meth:`_transaction`)."""
        self._command(
            keys=[key, self.key("epoch")],
            args=[command.upper(), *args, self.epoch or ""],
            client=pipe,
        )

    def _refused(self, exc: Exception) -> bool:
        """True: a fence refusal after which the write is made again (the epoch taken
        anew); False: not a refusal. Raises when the write stays refused."""
        message = str(exc)  # in a pipeline, after redis-py's "Command # n (...) of pipeline"
        at = message.rfind(LOST_ERROR)
        if at < 0:
            return False
        found = message[at + len(LOST_ERROR) :].strip() or None
        self.refused += 1
        if self.on_refused is not None and self.on_refused(found):
            return True
        from ..history.epoch import StoreLost

        raise StoreLost(self.skey, self.key("epoch"), self.epoch, None, found)

    # -- the cycle ------------------------------------------------------------

    def lock(self) -> Any:
        """The lock a cycle is opened, rolled over and left under (with an expiry)."""
        return self.server.lock(
            self.key("lock"),
            timeout=self.lock_seconds,
            blocking_timeout=self.lock_seconds + 30,
            thread_local=False,
        )

    def now(self) -> float:
        """The Redis's time, seconds since the epoch: the one clock of the shared cycles'
        periods (each machine's own may be off)."""
        # KEYS: a key of the spider's, so on a cluster the master of its slot answers
        return server_time(self._now(keys=[self.key("state")]))

    def state(self) -> dict[str, str]:
        raw = self.server.hgetall(self.key("state"))
        try:
            state = {k.decode(): v.decode() for k, v in raw.items()}
            for name in ("cycle", "total", "new", "done"):
                if name in state:
                    int(state[name])
            for name in ("opened", "period_start"):
                if name in state:
                    float(state[name])
        except ValueError:  # UnicodeDecodeError too: not what this scheduler writes
            raise HistoryStoreError(
                f"the key {self.key('state')} in the Redis holds values this scheduler never "
                "wrote (read as data, not run): delete it or run `scrapy recrawl-reset`"
            ) from None
        return state

    def forget_recrawls(self) -> None:
        """Drop recrawls left by a cycle that was never closed."""
        self.server.delete(self.key("recrawls"))

    def open_cycle(self, state: dict[str, Any]) -> None:
        """Publish a newly opened cycle: its state, and no request taken yet."""
        fields = [x for k, v in state.items() for x in (k, v)]

        def build(pipe: Any) -> None:
            pipe.delete(self.key("taken"))
            self.pipe_fenced(pipe, "HSET", self.key("state"), *fields)

        self._transaction(build)

    def push_recrawls(
        self,
        queue: Any,
        cycle: int,
        df_key: str,
        entries: Iterable[tuple[dict[str, Any], str]],
    ) -> int:
        """Queue ``(request dict, fingerprint)`` entries best first, in batches, and mark
        them as ``cycle``'s picks and seen in its dupefilter set ``df_key``; returns
        how many."""
        keys = (queue.key, df_key, self.key(f"picks:{cycle}"))
        pushed, batch, fps = 0, [], []
        for d, fp in entries:
            batch.append(queue.serializer.dumps(d))
            fps.append(fp)
            if len(batch) >= 5000:
                pushed += self._push(keys, batch, fps)
                batch, fps = [], []
        if batch:
            pushed += self._push(keys, batch, fps)
        return pushed

    def _push(self, keys: tuple[str, str, str], batch: list[bytes], fps: list[str]) -> int:
        queue_key, df_key, picks_key = keys

        def build(pipe: Any) -> None:
            # FifoQueue pops from the right: best rank first
            self.pipe_fenced(pipe, "LPUSH", queue_key, *batch)
            # the spider's own link to them is then a duplicate
            self.pipe_fenced(pipe, "SADD", df_key, *fps)
            self.pipe_fenced(pipe, "SADD", picks_key, *fps)  # and a start request (is_pick)

        self._transaction(build)
        return len(batch)

    def close_cycle(self, cycle: int, df_key: str) -> None:
        """Mark ``cycle`` done; its recrawls, dupefilter set, start claims, picks and
        fetched set go."""

        def build(pipe: Any) -> None:
            pipe.delete(
                self.key("recrawls"),
                df_key,
                self.key(f"starts:{cycle}"),
                self.key(f"picks:{cycle}"),
                self.key(f"fetched:{cycle}"),
            )
            self.pipe_fenced(pipe, "HSET", self.key("state"), "done", 1)

        self._transaction(build)

    # -- start requests: one process fetches each, once per cycle -------------

    def claim_start(self, cycle: int, fingerprint: str) -> bool | None:
        """True: this worker fetches it; False: another worker claimed it;
        None: newly claimed here (the caller checks it is not a recrawl)."""
        claim = self.key(f"starts:{cycle}")
        if self.fenced("HSETNX", claim, fingerprint, self.worker_id):
            return None
        return self.server.hget(claim, fingerprint) == self.worker_id.encode()

    def is_pick(self, cycle: int, fingerprint: str) -> bool:
        """Whether the URL is among ``cycle``'s recrawls. Not the dupefilter's say:
        that set also holds the links the spider followed, which a start request of
        a known URL must not be dropped for."""
        return bool(self.server.sismember(self.key(f"picks:{cycle}"), fingerprint))

    # -- each URL at most once per cycle, across the processes -------------------

    def mark_fetched(self, cycle: int, fingerprint: str, spider: bool) -> bool:
        """Note the URL as fetched in ``cycle``; False: some process fetched it already."""
        keys, args = [self.key(f"fetched:{cycle}")], [fingerprint, "s" if spider else "x"]
        return bool(self._guarded(self._fetched, keys, args))

    # -- the shared budget -------------------------------------------------------

    def taken(self) -> dict[str, int]:
        raw = self.server.hgetall(self.key("taken"))
        return {k.decode(): int(v) for k, v in raw.items()}

    def reserve(self, side: str, total: int | None, quota: int | None) -> bool:
        """Take one budgeted request of ``side`` if the budget and its quota allow (atomic)."""
        args = [-1 if total is None else total, side, -1 if quota is None else quota]
        return bool(self._guarded(self._reserve, [self.key("taken")], args))

    def give_back(self, side: str) -> None:
        """Another process emptied the queue first: the reservation is returned."""

        def build(pipe: Any) -> None:
            self.pipe_fenced(pipe, "HINCRBY", self.key("taken"), "total", -1)
            self.pipe_fenced(pipe, "HINCRBY", self.key("taken"), side, -1)

        self._transaction(build)

    # -- workers -----------------------------------------------------------------

    def write_status(self, cycle: int, busy: bool) -> float:
        """This worker's status, seen now by the Redis's clock (returned)."""
        args = stamp_args(self.worker_id, {"cycle": int(cycle), "busy": bool(busy)})
        return float(self._guarded(self._status, [self.key("workers")], args))

    def workers(self, timeout: float) -> dict[str, dict[str, Any]]:
        """Workers seen within ``timeout`` seconds, by id, with their status: seen and now
        both by the Redis's clock, never by this machine's (which may be off)."""
        raw = self.server.hgetall(self.key("workers"))
        return seen_within(raw, self.now(), timeout)

    def deregister(self) -> None:
        self.server.hdel(self.key("workers"), self.worker_id)


class FencedClient:
    """The Redis client the frontier's queues and dupefilter are given: the commands of
    theirs that can create a key (:data:`FENCED_COMMANDS`: pushes, adds) go behind the
    fence of ``frontier`` (module docstring); everything else (pops, lengths, pipelines
    of pops, deletes) is the client's own."""

    def __init__(self, frontier: RedisFrontier) -> None:
        self._frontier = frontier
        self._server = frontier.server

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def lpush(self, key: Any, *values: Any) -> Any:
        return self._frontier.fenced("LPUSH", key, *values)

    def rpush(self, key: Any, *values: Any) -> Any:
        return self._frontier.fenced("RPUSH", key, *values)

    def sadd(self, key: Any, *values: Any) -> Any:
        return self._frontier.fenced("SADD", key, *values)

    def zadd(self, key: Any, mapping: dict[Any, Any], **options: Any) -> Any:
        if options:  # not what a queue here sends: as the client does it, unfenced
            raise TypeError(f"a fenced ZADD takes no options: {sorted(options)}")
        pairs = [x for member, score in mapping.items() for x in (score, member)]
        return self._frontier.fenced("ZADD", key, *pairs)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        # scrapy-redis's PriorityQueue pushes with execute_command("ZADD", key, ...)
        if args and str(args[0]).upper() in FENCED_COMMANDS and not options:
            return self._frontier.fenced(str(args[0]), args[1], *args[2:])
        return self._server.execute_command(*args, **options)


def live_workers(settings: Any, spider: str) -> tuple[str, list[str], float]:
    """The processes crawling ``spider``'s shared cycle now (``scrapy recrawl-reset``
    refuses while there are any): those whose status the Redis saw within
    ``RECRAWL_REDIS_WORKER_TIMEOUT`` seconds, by its own clock. A crawl that ended
    cleanly has left; one that was killed counts until that timeout has passed.
    Returns (where, their worker ids: host:pid:token, the timeout)."""
    from ..history.redis_connection import cluster_mode, redis_from_settings

    timeout = worker_timeout(settings)
    names = spider_keys(settings, spider, cluster_mode(settings))
    server, location = redis_from_settings(settings)
    try:
        frontier = RedisFrontier(server, names.scheduler, "recrawl-reset", lock_seconds=1.0)
        return location, sorted(frontier.workers(timeout)), timeout
    finally:
        server.close()


def reset_spider(settings: Any, spider: str) -> tuple[str, int]:
    """Delete one spider's shared cycle: its state, budget counters, workers, lock,
    recrawl and new-URL queues, start claims, picks and dupefilter sets (``scrapy
    recrawl-reset``, beside the store's clear()). Returns (where, keys deleted).

    The keys are those RedisRecrawlScheduler names for ``spider`` from the same
    settings (``RECRAWL_REDIS_SCHEDULER_KEY``, ``SCHEDULER_QUEUE_KEY``,
    ``SCHEDULER_DUPEFILTER_KEY``); no other spider's key is touched.
    """
    from ..history.redis_connection import cluster_mode, redis_from_settings

    names = spider_keys(settings, spider, cluster_mode(settings))
    skey, dupes = names.scheduler, names.dupefilter
    server, location = redis_from_settings(settings)
    try:
        names_ = ("state", "taken", "workers", "lock", "recrawls", "backlog", "epoch")
        keys = [f"{skey}:{n}" for n in names_]
        keys += [names.queue, dupes]
        patterns = ("starts", "picks", "fetched")
        for pattern in [f"{skey}:{p}:*" for p in patterns] + [f"{dupes}:*"]:
            keys += server.scan_iter(match=_glob_escaped(pattern[:-1]) + "*", count=1000)
        return location, int(server.delete(*keys))
    finally:
        server.close()


def _glob_escaped(text: str) -> str:
    """``text`` matched literally by SCAN's MATCH (a ``[`` or ``*`` in a name is no glob)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
