"""The distributed history store: per-URL state and the visit log in Redis.

Many crawler processes (on many machines) share one store, on one Redis or on a Redis
Cluster (``client=`` a redis-py ``RedisCluster``: the one code path serves both).
docs/distributed.md, "The history store's encoding", says what each byte is; in short
(schema version 5, :mod:`.redis_schema`):

* The per-URL data are split into S shards (``{p}:meta`` field ``shards``, 16 by
  default: ``RECRAWL_REDIS_SHARDS``); a URL's shard comes from its fingerprint, and
  every key of a shard carries the shard's hash tag ``{<prefix>#<s>}``: its rows (one
  string of fixed 87-byte rows, :data:`~.redis_schema.ROW_DTYPE`), its URL index (16,384
  small hashes: 10 bytes of the fingerprint's hash -> id), its blobs (one append-only
  string: each URL and its request, the request's repeated part kept once in the
  store's dictionary), validators, signatures, bodies, id counter, visit log and the
  log's per-cycle start, and a copy of the store's epoch.
* The store's own keys carry ``{<prefix>}``: meta, the cycle counter, the frontier,
  side storage, the request-shape dictionary; and, beside the history, the crawl
  lease (:meth:`RedisHistoryStore.hold`, :data:`~.redis_schema.LEASE`): which crawls
  have the store open now, for ``scrapy recrawl-reset``.

Visits are **buffered** (:meth:`RedisHistoryStore.record` returns the record the
visit will make, folded client-side by the same rule) and written by
:meth:`~RedisHistoryStore.flush`: one Lua script per shard touched, pipelined, one
round trip. The script folds each visit server-side (:data:`~.redis_schema.RECORD_LUA`,
the rule of :func:`~scrapy_recrawl.history.state.observe` with the same floating-point
operations in the same order), so N processes never lose an update and a URL's row is
never ahead of its shard's log. A flush happens every ``flush_every`` visits, every
``flush_seconds``, on the middleware's idle timer (``RECRAWL_FLUSH_SECONDS``), before
any read (read your own writes) and on close; a failed flush keeps the buffer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .base import (
    SCHEMA_VERSION,
    FlushFailed,
    HistoryArrays,
    HistoryStoreError,
    StoredBody,
    UrlRecord,
    Visit,
    refuse_when_full,
)
from .epoch import StoreLost, new_epoch
from .legacy_pickle import BASKET_MODEL_TABLE, MODEL_DROPPED, REQUESTS_DROPPED
from .records import check_table, unpack_list, window_from_bits
from .redis_connection import (
    _redis_errors,
    client_location,
    redacted,
    redis_from_settings,
    redis_location,
)
from .redis_liveness import NOW_LUA, STAMP_LUA, holder_id, seen_within, server_time, stamp_args
from .redis_schema import (
    ADVANCE_CYCLE_LUA,
    BIG_BLOB,
    DEFAULT_SHARDS,
    DICT_LUA,
    GET_LUA,
    GONE,
    HAS_BODY,
    ID_BLOCK,
    LEASE,
    LOG_DTYPE,
    LOG_FORMAT,
    LOST_ERROR,
    MAX_SHAPE,
    MIGRATE_1_TO_2_LUA,
    MIGRATE_2_TO_3_LUA,
    NO_COUNT,
    POP_FRONTIER_LUA,
    PRESENT,
    PUSH_FRONTIER_LUA,
    READ_CHUNK,
    RECORD_LUA,
    RESERVE_IDS_LUA,
    ROW_DTYPE,
    ROW_FORMAT,
    ROWS_PER_SHARD_V4,
    SAD,
    SIDE_DELETE_LUA,
    SIDE_PUSH_LUA,
    SIDE_PUT_LUA,
    VISIT_FORMAT,
    VISIT_HEAD,
    VISIT_TAIL,
    Layout,
    blob,
    guarded,
    host_of,
    shape_of,
    split_blob,
    url_from,
    url_part,
    v4_requests_as_data,
    widen_rows_v3,
)
from .request_codec import decode_stored, encode_stored
from .state import fold_visit, good_status

logger = logging.getLogger("scrapy_recrawl.history")
_INT_FIELD = re.compile(rb"-?[0-9]{1,19}")


def _validator(value: bytes | None) -> str | None:
    """A stored ETag / Last-Modified, if it can be a header value (printable ASCII):
    anything else read back is not ours, and is not sent (the page is fetched whole)."""
    if value is None or not all(32 <= b < 127 for b in value):
        return None
    return value.decode("ascii")


# Redis locations whose persistence and eviction settings were looked at (once a process).
_CONFIG_SEEN: set[str] = set()


def _location(client: Any) -> str:
    """Where a client points, for messages (a Redis Cluster client: its first node)."""
    if hasattr(client, "connection_pool"):
        return client_location(client)
    nodes = client.get_nodes() if hasattr(client, "get_nodes") else []
    first = nodes[0] if nodes else None
    return f"redis-cluster://{getattr(first, 'host', '?')}:{getattr(first, 'port', '?')}"


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8", "surrogateescape")


def _copy(value: Any) -> Any:
    """A copy of a decoded shape's containers (its dicts and lists are the caller's)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


class RedisHistoryStore:
    """The history store in Redis, shared by many crawler processes (module docstring)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        settings: Any = None,
        key: str = "recrawl",
        store_bodies: bool = True,
        log_maxlen: int = 10_000_000,
        client: Any = None,
        on_loss: str = "stop",
        shards: int = DEFAULT_SHARDS,
        flush_every: int = 1000,
        flush_seconds: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self._settings = settings
        self.key = key
        self.store_bodies = store_bodies
        self.log_maxlen = int(log_maxlen)
        self._client = client
        if client is not None:
            self.location = _location(client)
        elif url is not None:
            self.location = redacted(url)
        else:
            # where scrapy-redis's settings point; resolved without connecting
            self.location = redis_location(settings)
        #: shards of a store this process creates (an existing one keeps its own)
        self.new_shards = max(1, int(shards))
        self.flush_every = max(1, int(flush_every))
        self.flush_seconds = float(flush_seconds)
        #: the flush timer's clock (seconds, only differences count): a test may pass its own
        self._monotonic = monotonic
        self.layout = Layout(key, self.new_shards)
        self._scripts: dict[str, Any] = {}
        #: stored values read back that were not data (skipped): the stat
        #: ``recrawl/unreadable_values``
        self.unreadable_values = 0
        #: RECRAWL_ON_STORE_LOSS: "stop" or "continue" (history/epoch.py)
        self.on_loss = on_loss
        #: called with the StoreLost before it is raised ("stop"); the crawl sets it
        self.on_lost: Callable[[StoreLost], None] | None = None
        #: the identity of the store this process opened (None: not open)
        self.epoch: str | None = None
        self.epoch_created: float | None = None
        self._claimed: str | None = None  # the spider this process claimed the store for
        #: this process's field of the crawl lease (hold(); None: not held) and the
        #: seconds it lasts after each stamp
        self.holder: str | None = None
        self._lease_seconds = 0.0
        self._last_cycle = 0  # the highest cycle counter seen ("continue" keeps it)
        self._reset_buffers()

    def _reset_buffers(self) -> None:
        # visits waiting for flush(): (shard, bucket, fingerprint, script arguments, the
        # PendingRecord record() returned for it and the visit, when it was not predicted)
        # (its arguments wait as (id, visit, field, body) while its host is new)
        self._pending: list[
            tuple[
                int,
                int,
                bytes,
                tuple[bytes, bytes] | tuple[int, Visit, bytes, bytes | None],
                tuple[PendingRecord, Visit] | None,
            ]
        ] = []
        self._pending_fps: set[bytes] = set()
        self._proposed: dict[bytes, int] = {}  # ids proposed for buffered unread URLs
        self._new_hosts: set[str] = set()  # hosts of buffered visits, not in the dictionary yet
        # the batch sent and not yet answered: (plan, its visits, what _send() gave)
        self._inflight: tuple[list[Any], list[Any], Any] | None = None
        # fingerprint -> (record, signature known): what record() predicts from
        # ... and the server's (id, row) after the last flush of its visits, not yet read;
        # a record not read from the store nor learnt from a flush is not in it
        self._cache: dict[bytes, tuple[UrlRecord, bool, tuple[int, bytes] | None]] = {}
        self._reserved: dict[int, list[int]] = {}  # shard -> [next local, end]
        self._shape_ids: dict[bytes, int] = {}
        self._shapes: dict[int, Any] = {}  # id -> decoded shape (None: not data)
        self._host_ids: dict[str, int] = {}
        self._hosts: dict[int, str | None] = {}
        self._order = 0
        self._last_flush = self._monotonic()
        self._writes = 0  # flushes so far: a rows() snapshot is as new as this
        self._snapshot: tuple[int, np.ndarray] | None = None

    @classmethod
    def from_settings(
        cls, settings: Any, url: str | None = None, **options: Any
    ) -> RedisHistoryStore:
        return cls(url, settings=settings, **options)

    # -- lifecycle ---------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            raise HistoryStoreError(f"history store {self.location} is not open")
        return self._client

    @property
    def shards(self) -> int:
        return self.layout.shards

    def open(self) -> None:
        if self._client is not None and self._scripts:
            return
        meta = self._k("meta")
        try:
            if self._client is None:
                self._client, location = redis_from_settings(self._settings, self._url)
                if self._url is None:
                    self.location = location
            client = self._client
            client.ping()
            version, shards = client.hmget(meta, ["schema_version", "shards"])
            if version is None:
                old = client.hget(f"{self.key}:meta", "schema_version")
                if old is None:  # a new store
                    pipe = client.pipeline()
                    pipe.hsetnx(meta, "shards", self.new_shards)
                    pipe.hsetnx(meta, "schema_version", SCHEMA_VERSION)
                    pipe.hmget(meta, ["schema_version", "shards"])
                    version, shards = pipe.execute()[-1]
                else:
                    version, shards = old, None
        except _redis_errors() as exc:
            self._client = None
            raise HistoryStoreError(
                f"cannot reach the history store at {self.location} (RECRAWL_STORE, "
                f"REDIS_URL): {exc}"
            ) from exc
        try:
            version = int(version)
        except (TypeError, ValueError):
            self._client = None
            raise HistoryStoreError(
                f"history store {self.location}: the key {meta} does not hold a "
                "schema version this scrapy-recrawl wrote (read as data, not run): point "
                "RECRAWL_STORE or RECRAWL_REDIS_KEY elsewhere"
            ) from None
        if version > SCHEMA_VERSION:
            self._client = None
            raise HistoryStoreError(
                f"history store {self.location} (key {self.key!r}) has schema version "
                f"{version}, newer than this scrapy-recrawl understands ({SCHEMA_VERSION}): "
                "upgrade scrapy-recrawl or point RECRAWL_STORE elsewhere"
            )
        if version < SCHEMA_VERSION:
            self._migrate(version)
            shards = self._call("read", lambda c: c.hget(meta, "shards"))
        else:
            from .redis_bulk import drop_v4_leftovers

            self._call("write to", lambda c: drop_v4_leftovers(c, self.key))
        self.layout = Layout(self.key, int(shards or 1))
        self._identify()
        self._check_config()
        # every script that writes is guarded by the epoch (redis_schema.guarded)
        self._scripts = {
            "record": client.register_script(guarded(RECORD_LUA)),
            "get": client.register_script(GET_LUA),
            "dict": _Guarded(self, client.register_script(guarded(DICT_LUA))),
            "push_frontier": _Guarded(self, client.register_script(guarded(PUSH_FRONTIER_LUA))),
            "pop_frontier": _Guarded(self, client.register_script(guarded(POP_FRONTIER_LUA))),
            "side_push": _Guarded(self, client.register_script(guarded(SIDE_PUSH_LUA))),
            "side_put": _Guarded(self, client.register_script(guarded(SIDE_PUT_LUA))),
            "side_delete": _Guarded(self, client.register_script(guarded(SIDE_DELETE_LUA))),
            "advance_cycle": _Guarded(self, client.register_script(guarded(ADVANCE_CYCLE_LUA))),
            "reserve_ids": _Guarded(self, client.register_script(guarded(RESERVE_IDS_LUA))),
            "lease": _Guarded(self, client.register_script(guarded(STAMP_LUA))),
            "now": client.register_script(NOW_LUA),
        }
        self._last_cycle = max(self._last_cycle, self._read_cycle())

    # -- identity (history/epoch.py) -------------------------------------------

    def _identify(self, *, fresh: bool = False) -> None:
        """Give the store an epoch unless it has one (HSETNX: the first process wins, the
        others adopt it) and remember it; and each shard its copy (written once, when the
        store is made: a shard that lost it -- a node that lost its data -- is noticed).
        ``fresh``: after a loss ("continue"), also the fields a new store starts with,
        the owner and the cycle counter as they were, and every shard's copy."""
        token, created = new_epoch()
        meta = self._k("meta")

        def identify(c: Any) -> list[Any]:
            pipe = c.pipeline()  # MULTI/EXEC (one slot): token and time from one process
            if fresh:
                pipe.hsetnx(meta, "schema_version", SCHEMA_VERSION)
                pipe.hsetnx(meta, "shards", self.shards)
                if self._claimed is not None:
                    pipe.hsetnx(meta, "spider", self._claimed)
                pipe.setnx(self._k("cycle"), self._last_cycle)
            pipe.hsetnx(meta, "epoch", token)
            pipe.hsetnx(meta, "epoch_created", repr(created))
            pipe.hmget(meta, ["epoch", "epoch_created", "shards_marked"])
            epoch, when, marked = pipe.execute()[-1]
            if fresh or marked is None:
                self._mark_shards(c, epoch, overwrite=fresh)
                c.hset(meta, "shards_marked", 1)
            return [epoch, when]

        epoch, when = self._call("write to", identify)
        self.epoch = epoch.decode()
        self.epoch_created = float(when) if when is not None else None

    def _mark_shards(self, c: Any, epoch: Any, *, overwrite: bool) -> None:
        pipe = c.pipeline(transaction=False)
        for s in range(self.shards):
            if overwrite:
                pipe.hset(self.layout.shard(s, "meta"), "epoch", epoch)
            else:
                pipe.hsetnx(self.layout.shard(s, "meta"), "epoch", epoch)
        pipe.execute()

    def check_epoch(self) -> None:
        """Raise :class:`StoreLost` if the store (or one of its shards) is no longer the
        one this process opened (vanished or replaced); with ``on_loss="continue"``, warn
        and go on with a fresh history instead."""

        def read(c: Any) -> list[Any]:
            pipe = c.pipeline(transaction=False)
            pipe.hget(self._k("meta"), "epoch")
            for s in range(self.shards):
                pipe.hget(self.layout.shard(s, "meta"), "epoch")
            return list(pipe.execute())

        for found in self._call("read", read):
            found = found.decode() if found is not None else None
            if found != self.epoch:
                self._lost(found)  # raises, unless "continue" went on with a fresh store
                break
        if self.holder is not None:
            self._stamp_lease()  # the store is this crawl's: its lease goes on

    # -- the crawl lease (redis_schema.LEASE; redis_liveness.py) ------------------

    def hold(self, seconds: float) -> str:
        """Hold the store's crawl lease (a crawl: history/epoch.py's watch takes it when
        the store is opened): this process's field, stamped now with the Redis's clock,
        again by every :meth:`check_epoch`, deleted by :meth:`close`; it lasts
        ``seconds`` after each stamp, so a killed crawl's lease dies. Stamped behind the
        epoch, as every write: a crawl that outlives a reset does not re-create it.
        Returns the holder id (``host:pid:token``)."""
        if self.holder is None:
            self.holder = holder_id()
        self._lease_seconds = float(seconds)
        self._stamp_lease()
        return self.holder

    def _stamp_lease(self) -> None:
        assert self.holder is not None
        script, key = self._script("lease"), self._k(LEASE)
        args = stamp_args(self.holder, {}, self._lease_seconds)
        self._call("write to", lambda c: script(keys=[key], args=args, client=c))

    def holders(self, timeout: float) -> dict[str, dict[str, Any]]:
        """The crawls holding the store now (``scrapy recrawl-reset`` refuses while there
        are any): the lease's holders stamped within ``timeout`` seconds of the Redis's
        time now, by holder id (``host:pid:token``), with their status."""
        key, now = self._k(LEASE), self._script("now")

        def read(c: Any) -> dict[str, dict[str, Any]]:
            raw = c.hgetall(key)
            return seen_within(raw, server_time(now(keys=[key], client=c)), timeout)

        return dict(self._call("read", read))

    def _release(self, client: Any) -> None:
        """Leave the lease (HDEL never creates the key); an unreachable Redis lets it
        expire on its own."""
        holder, self.holder = self.holder, None
        if holder is None:
            return
        try:
            client.hdel(self._k(LEASE), holder)
        except _redis_errors():
            pass  # gone within its seconds: what a killed crawl's does

    def _lost(self, found: str | None) -> None:
        exc = StoreLost(self.location, self.key, self.epoch, self.epoch_created, found)
        if self.on_loss == "continue":
            old = self.epoch
            self._identify(fresh=True)
            self._cache.clear()  # a fresh history: what this process knew is gone
            # ids this process reserved (and maybe handed out) stay its own
            blocks = list(self._reserved.items())
            self._call(
                "write to",
                lambda c: [c.setnx(self.layout.shard(s, "next"), b[1]) for s, b in blocks],
            )
            # the hosts and request shapes it knows keep their ids (its buffered visits
            # and blobs name them): written again into the fresh dictionaries
            for ids, table, index in (
                (self._host_ids, "hosts", "hostidx"),
                (self._shape_ids, "dict", "dictidx"),
            ):
                known = {k: v for k, v in ids.items() if v > 0}
                if known:
                    self._call(
                        "write to",
                        lambda c, t=table, i=index, m=known: (
                            c.hset(self._k(t), mapping={v: k for k, v in m.items()}),
                            c.hset(self._k(i), mapping=m),
                        ),
                    )
            logger.warning(
                "recrawl: the history store at %s (key %r, epoch %s) %s; "
                "RECRAWL_ON_STORE_LOSS = 'continue': going on with a fresh history (epoch %s)",
                self.location,
                self.key,
                old,
                "vanished" if found is None else f"was replaced (epoch {found})",
                self.epoch,
            )
            return
        if self.on_lost is not None:
            self.on_lost(exc)
        raise exc

    def _check_config(self) -> None:
        """Warn once per Redis when its settings can lose the history unnoticed until the
        epoch check: eviction of keys, no persistence. A managed Redis may refuse CONFIG:
        then nothing is said."""
        if self.location in _CONFIG_SEEN:
            return
        _CONFIG_SEEN.add(self.location)
        try:
            config = {}
            for name in ("maxmemory-policy", "appendonly", "save"):
                got = self.client.config_get(name)
                if got and isinstance(next(iter(got.values())), dict):
                    got = next(iter(got.values()))  # a cluster: per node; the first says
                config.update(got)
        except _redis_errors():
            return
        config = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in config.items()
        }
        policy = config.get("maxmemory-policy")
        if policy not in (None, "noeviction"):
            logger.warning(
                "recrawl: the Redis at %s has maxmemory-policy %s: when it is full it drops keys, "
                "and the history store (key %r) with them; set maxmemory-policy noeviction "
                "(docs/distributed.md)",
                self.location,
                policy,
                self.key,
            )
        if config.get("appendonly") == "no" and config.get("save") == "":
            logger.warning(
                "recrawl: the Redis at %s keeps nothing on disk (appendonly no, no save): a restart "
                "loses the history store (key %r); set appendonly yes (docs/distributed.md)",
                self.location,
                self.key,
            )

    # -- migrations: the keys of versions 1 to 4 are ``<prefix>:<name>`` ---------------

    def _old(self, name: str) -> str:
        return f"{self.key}:{name}"

    def _migrate(self, version: int) -> None:
        """Bring a store of an older schema up to this release's, one step at a time
        (each checks the version it starts from: a step runs once, all of it or none)."""
        for step in range(version, SCHEMA_VERSION):
            if step == 1:
                keys = [self._old(n) for n in ("meta", "bags", "dists")]
                keys += [self._old("side:content_bags"), self._old("side:content_dists")]
                self._call("migrate", lambda c, k=keys: c.eval(MIGRATE_1_TO_2_LUA, len(k), *k))
            elif step == 2:
                meta = self._old("meta")
                self._call("migrate", lambda c, m=meta: c.eval(MIGRATE_2_TO_3_LUA, 1, m))
            elif step == 3:
                self._call("migrate", self._migrate_3_to_4)
            elif step == 4:
                from .redis_bulk import migrate_4_to_5

                self._call("migrate", lambda c: migrate_4_to_5(c, self.key, self.location))
            elif step == 5:
                from .redis_scrub import migrate_5_to_6

                shards = int(self._call("read", lambda c: c.hget(self._k("meta"), "shards")) or 1)
                layout = Layout(self.key, shards)
                self._call("migrate", lambda c, lay=layout: migrate_5_to_6(c, lay, self.location))
            elif step == 6:
                # version 7 changed the SQLite store only (its rows' change window, the
                # log's index and cap): a Redis row has kept its window (cwin) since
                # version 5 and its log is capped and indexed by cycle (logstart)
                meta = self._k("meta")
                self._call("migrate", lambda c, m=meta: c.hset(m, "schema_version", 7))
            elif step == 7:
                # version 8: each cycle's record may keep the crawl's freshness estimate
                # (side table cycle_freshness, history/cycle_log.py), a side hash of
                # plain records like the others; the cycles crawled before have none
                # (the report fits theirs from the log): nothing to move
                meta = self._k("meta")
                self._call("migrate", lambda c, m=meta: c.hset(m, "schema_version", 8))

    def _migrate_3_to_4(self, client: Any) -> None:
        """Version 4, every part of it in one MULTI/EXEC, under WATCH: a process of the
        old release recording meanwhile (or another one migrating) makes it start again;
        a store some other process already migrated is left alone."""
        import redis

        where = f"{self.location} (key {self.key!r})"
        # its part for requests first: field by field, compare-and-set, safe to run again
        dropped = v4_requests_as_data(client, self.key)
        if sum(dropped.values()):
            logger.warning(
                REQUESTS_DROPPED,
                sum(dropped.values()),
                where,
                dropped["requests"],
                dropped["frontier"],
            )
        meta = self._old("meta")
        model = self._old(f"side:{BASKET_MODEL_TABLE}")  # a pickle in version 3: dropped
        for _ in range(100):
            with client.pipeline() as pipe:
                try:
                    pipe.watch(meta, self._old("next_id"))
                    if int(pipe.hget(meta, "schema_version") or 0) != 3:
                        return
                    writes = self._v4_failure_counts(pipe)
                    had_model = bool(pipe.exists(model))
                    pipe.multi()
                    for write in writes:
                        write(pipe)
                    pipe.delete(model)
                    pipe.hset(meta, "schema_version", 4)
                    pipe.execute()
                    if had_model:
                        logger.warning(MODEL_DROPPED, where)
                    return
                except redis.WatchError:
                    continue
        raise HistoryStoreError(
            f"history store {self.location}: the migration to schema version 4 kept being "
            "interrupted by other writers; stop the crawlers of the older release and retry"
        )

    def _v4_failure_counts(self, pipe: Any) -> list[Any]:
        """Version 4's part for failed downloads: every row widened by ``failures`` (0)
        and ``last_failure_cycle`` (-1), 112 -> 120 bytes. Reads (the shards, watched)
        now, on the WATCHing ``pipe``; returns the writes to queue inside MULTI."""
        total = int(pipe.get(self._old("next_id")) or 0)
        rps = int(pipe.hget(self._old("meta"), "rows_per_shard") or ROWS_PER_SHARD_V4)
        shards = [self._old(f"rows:{s}") for s in range((total + rps - 1) // rps)]
        if shards:
            pipe.watch(*shards)
        widened = [(key, widen_rows_v3(pipe.get(key) or b"")) for key in shards]
        return [lambda p, key=key, rows=rows: p.set(key, rows) for key, rows in widened]

    def close(self) -> None:
        if self._client is None:
            return
        try:
            self.flush()  # a failure raises, and keeps the buffer and the connection
        except StoreLost:
            if self.on_lost is None:
                raise
            # a crawl's store: its hook said so in one line and stopped the crawl; the
            # visits went with the store
        client, self._client = self._client, None
        self._release(client)  # a clean close: reset may go ahead at once
        self._scripts = {}
        self.epoch = self.epoch_created = None
        self._reset_buffers()
        if self._url is not None or self._settings is not None:
            client.close()  # ours: release its connections

    def __enter__(self) -> RedisHistoryStore:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _k(self, name: str) -> str:
        """The name of one of the store's own keys (``{<prefix>}:<name>``)."""
        return self.layout.store(name)

    def _call(self, what: str, fn: Any, for_: str = "") -> Any:
        client = self.client
        try:
            return fn(client)
        except _redis_errors() as exc:
            raise HistoryStoreError(
                f"cannot {what} the history store at {self.location} (RECRAWL_STORE){for_}: {exc}"
            ) from exc

    def _script(self, name: str) -> Any:
        if not self._scripts:
            raise HistoryStoreError(f"history store {self.location} is not open")
        return self._scripts[name]

    # -- cycles ------------------------------------------------------------

    def _read_cycle(self) -> int:
        return self._int(self._call("read", lambda c: c.get(self._k("cycle"))), "cycle")

    @property
    def cycle(self) -> int:
        """The shared cycle counter, read from Redis (another process may have moved it)."""
        cycle = self._read_cycle()
        self._last_cycle = max(self._last_cycle, cycle)
        return cycle

    def _int(self, value: Any, name: str) -> int:
        """A counter read back (None: 0); a value that is not one stops with the key named."""
        try:
            return int(value or 0)
        except ValueError:
            raise HistoryStoreError(
                f"history store {self.location}: the key {self._k(name)} does not hold a "
                "counter this scrapy-recrawl wrote (read as data, not run)"
            ) from None

    def advance_cycle(self) -> int:
        self.flush()  # the visits recorded so far belong to the cycle they were made in
        script = self._script("advance_cycle")
        cycle = int(
            self._call("write to", lambda c: script(keys=[self._k("cycle")], args=[], client=c))
        )
        self._last_cycle = max(self._last_cycle, cycle)
        return cycle

    # -- writes: record() buffers, flush() writes ------------------------------------

    def _reserve(self, shard: int) -> int:
        """A new URL id of ``shard``, from a block this process reserved (INCRBY)."""
        block = self._reserved.get(shard)
        if block is None or block[0] >= block[1]:
            # behind the shard's epoch: a reset store's counter is not re-created
            keys, meta = [self.layout.shard(shard, "next")], self.layout.shard(shard, "meta")
            script = self._script("reserve_ids")
            end = int(
                self._call(
                    "write to",
                    lambda c: script(keys=keys, args=[ID_BLOCK], client=c, meta=meta),
                )
            )
            block = self._reserved[shard] = [end - ID_BLOCK, end]
        local = block[0]
        block[0] += 1
        return self.layout.id_of(shard, local)

    def _shape_id(self, shape: bytes) -> int:
        """The dictionary id of a request shape (0: kept inline)."""
        if len(shape) > MAX_SHAPE:
            return 0
        sid = self._shape_ids.get(shape)
        if sid is None:
            script = self._script("dict")
            keys = [self._k("dict"), self._k("dictidx")]
            sid = int(
                self._call("write to", lambda c: script(keys=keys, args=[shape], client=c))[0]
            )
            self._shape_ids[shape] = sid
        return sid

    def _host_id(self, url: str) -> int:
        """The host dictionary's id of the URL's scheme and host (0: kept whole). A host
        new to this process is registered by the next flush (_new_host_ids), before the
        arguments of its visits are made: here it is known."""
        return self._host_ids.get(host_of(url)[0], 0)

    def _host(self, hid: int) -> str | None:
        if hid not in self._hosts:  # a host not seen yet: the whole dictionary, once
            every = self._call("read", lambda c: c.hgetall(self._k("hosts")))
            for k, v in every.items():
                self._hosts[int(k)] = v.decode("utf-8", "surrogateescape")
        return self._hosts.get(hid)  # None: not in the dictionary (not ours), read again

    def _blob(self, visit: Visit) -> tuple[int, bytes]:
        """The URL's blob, as RECORD_LUA takes it: ``(1, blob)`` (set), ``(2, URL part)``
        (the URL, with the request stored before, if any: a visit without a request keeps
        the stored one)."""
        shape = None
        if visit.request is not None:
            shape = shape_of(visit.request, visit.url)  # None: not data, keep the stored request
        part = url_part(visit.url, self._host_id(visit.url))
        if shape is None:
            return 2, part
        return 1, blob(part, self._shape_id(shape), shape)

    def _visit_args(
        self, uid: int, visit: Visit, field: bytes, body: bytes | None
    ) -> tuple[bytes, bytes]:
        """One visit as RECORD_LUA takes it: its numbers, then its strings with their
        lengths (the host of its URL already in the dictionary, or kept whole)."""
        etag, lastmod = _bytes(visit.etag), _bytes(visit.last_modified)
        sig, (mode, part) = visit.signature, self._blob(visit)
        strings = [field, etag, lastmod, sig, part, body]
        return (
            VISIT_FORMAT.pack(
                uid,
                float(visit.time),
                int(visit.status),
                -1 if visit.changed is None else int(bool(visit.changed)),
                int(visit.distance),
                int(visit.added),
                int(visit.removed),
                int(visit.modified),
                int(visit.attributes),
                int(visit.size),
                int(bool(visit.gone)),
                -1 if visit.cycle is None else int(visit.cycle),
            ),
            VISIT_TAIL.pack(
                len(field),
                -1 if etag is None else len(etag),
                -1 if lastmod is None else len(lastmod),
                -1 if sig is None else len(sig),
                mode,
                len(part),
                -1 if body is None else len(body),
            )
            + b"".join(x for x in strings if x is not None),
        )

    def _new_host_ids(self) -> None:
        """The dictionary ids of the hosts new since the last flush, in one script call;
        then the arguments of the visits that waited for them."""
        if not self._new_hosts:  # no visit waits (only a new host makes one wait)
            return
        hosts = sorted(self._new_hosts)
        script = self._script("dict")
        keys = [self._k("hosts"), self._k("hostidx")]
        ids = self._call("write to", lambda c: script(keys=keys, args=hosts, client=c))
        self._host_ids.update(zip(hosts, (int(i) for i in ids), strict=True))
        self._new_hosts.clear()
        self._pending = [
            (shard, bucket, fp, self._visit_args(*args) if len(args) == 4 else args, lazy)
            for shard, bucket, fp, args, lazy in self._pending
        ]

    def record(self, visit: Visit) -> UrlRecord:
        """Buffer the visit; return the record it makes.

        For a URL this process has read (the middleware's ``get()`` before
        ``record()``) or written, the record is predicted here with the same fold, from
        what it read or what the server answered to its last flush (the server's fold at
        flush is authoritative). For a URL it has neither read nor written, nothing is
        read now (that would be a round trip per visit): the result is a
        :class:`PendingRecord`, filled from the server's own fold of this visit when it is
        flushed -- looking at it before that flushes. Such a URL, if the store does not
        know it, takes an id of its shard's block reserved by this process; if another
        process indexed it first, the flush keeps that one's id (docs/distributed.md)."""
        self._script("record")  # not open: say so now
        refuse_when_full(self, self.flush_every)  # writes failing: not taken past the bound
        fp = visit.fingerprint
        shard, bucket, field = self.layout.locate(fp)
        cycle = self._last_cycle if visit.cycle is None else int(visit.cycle)
        cached = self._cache.pop(fp, None)
        lazy: tuple[PendingRecord, Visit] | None = None
        if cached is not None:
            old, sig_known, learnt = cached
            rec = _clone(old)
            if learnt is not None:  # the server's fold of its last flushed visit
                rec.id = learnt[0]
                _numbers(rec, learnt[1])
            sig_known = sig_known or visit.signature is not None
        else:
            # not read nor written by this process: proposed as new (the server keeps the
            # id it has, if any), and the caller's record filled from the server's fold
            uid = self._proposed.get(fp) or self._reserve(shard)  # one id for its visits
            self._proposed[fp] = uid
            rec = UrlRecord(
                id=uid,
                url=visit.url,
                fingerprint=fp,
                first_seen=visit.time,
                first_cycle=self._last_cycle,
            )
            sig_known = True
            lazy = (PendingRecord(self, fp), visit)
        fold_visit(rec, visit, cycle)
        if visit.signature is not None:
            rec.signature, sig_known = visit.signature, True
        body = None
        if self.store_bodies and visit.body is not None and good_status(visit.status):
            headers = json.dumps(visit.headers or {}).encode()
            body = (
                struct.pack("<HI", visit.status, len(headers))
                + headers
                + zlib.compress(visit.body, 1)
            )
            rec.has_body = True
        args: tuple[bytes, bytes] | tuple[int, Visit, bytes, bytes | None]
        host = host_of(visit.url)[0]
        if host and len(host) <= MAX_SHAPE and host not in self._host_ids:
            # a host new to this process: its dictionary id is asked for at the flush,
            # with every other new host's (one round trip, not one per host)
            self._new_hosts.add(host)
            args = (rec.id, visit, field, body)
        else:
            args = self._visit_args(rec.id, visit, field, body)
        self._pending.append((shard, bucket, fp, args, lazy))
        self._pending_fps.add(fp)
        if lazy is None:
            self._remember(fp, rec, sig_known)
        if (
            len(self._pending) >= self.flush_every
            or self._monotonic() - self._last_flush >= self.flush_seconds
        ):
            try:
                self._flush(wait=False)
            except StoreLost:
                raise  # the buffer went with the store
            except HistoryStoreError as exc:  # the visit is buffered: not to be recorded again
                raise FlushFailed(str(exc), _clone(rec) if lazy is None else lazy[0]) from exc
        return _clone(rec) if lazy is None else lazy[0]

    #: records kept for predictions (the oldest go first; never one with buffered visits)
    CACHE_SIZE = 20_000

    def _remember(self, fp: bytes, rec: UrlRecord, sig_known: bool) -> None:
        self._cache.pop(fp, None)
        self._cache[fp] = (rec, sig_known, None)
        while len(self._cache) > max(self.CACHE_SIZE, 2 * self.flush_every):
            oldest = next(iter(self._cache))
            if oldest in self._pending_fps:
                break
            del self._cache[oldest]

    @property
    def buffered_visits(self) -> int:
        inflight = len(self._inflight[1]) if self._inflight is not None else 0
        return len(self._pending) + inflight

    def flush(self) -> None:
        """Write the buffered visits: one guarded script per shard touched, pipelined
        (one round trip), each visit folded server-side; on return they are in Redis. A
        failure keeps the visits of the shards not written, for a retry."""
        self._flush(wait=True)

    def _flush(self, *, wait: bool) -> None:
        """``wait=False`` (record()'s own flush when the buffer is full): send the batch
        and go on; its answer is read at the next flush (or read, or close), so Redis
        folds one batch while this process prepares the next. At most one batch is in
        flight; until its answer is read its visits count as buffered (a failure puts
        them back, a read of one of their URLs waits for it)."""
        self._last_flush = self._monotonic()
        self._collect()
        if not self._pending or self._client is None:
            return
        self._new_host_ids()
        cur = self._read_cycle()
        self._last_cycle = max(self._last_cycle, cur)
        by_shard: dict[int, list[int]] = {}
        for i, (shard, *_) in enumerate(self._pending):
            by_shard.setdefault(shard, []).append(i)
        now = max(time.time_ns() // 1000 << 12, self._order + 4096)
        self._order = now
        plan = []
        for shard, idx in by_shard.items():
            buckets: dict[int, int] = {}
            keys = self.layout.shard_keys(shard)
            args: list[Any] = [
                ROW_FORMAT,
                LOG_FORMAT,
                -(-self.log_maxlen // self.shards) if self.log_maxlen > 0 else 0,
                self.shards,
                cur,
            ]
            for i in idx:
                _, bucket, _, visit_args, _ = self._pending[i]
                numbers, tail = visit_args  # type: ignore[misc]  # _new_host_ids made them
                if bucket not in buckets:
                    keys.append(self.layout.bucket(shard, bucket))
                    buckets[bucket] = len(keys)
                args.append(
                    VISIT_HEAD.pack(buckets[bucket]) + numbers + struct.pack("<q", now + i) + tail
                )
            keys.append(self.layout.shard(shard, "meta"))
            plan.append((shard, idx, keys, args))
        pending, self._pending = self._pending, []
        try:
            sent = self._send(plan)
        except HistoryStoreError:
            self._requeue(pending)  # not sent (Redis went away meanwhile): kept for a retry
            raise
        self._inflight = (plan, pending, sent)
        if wait:
            self._collect()

    def _send(self, plan: list[Any]) -> Any:
        """Send each shard's script of the batch; the answers are read by _collect().
        On one Redis: one connection taken from the pool, the commands written and the
        answers left on it until then. On a cluster (whose pipelines refuse scripts):
        each node's pipeline on its own connection, answered now (``("done", results)``)."""
        client, script = self.client, self._scripts["record"]
        if hasattr(client, "get_node_from_key"):
            return ("done", self._call("write to", lambda c: self._run(c, script, plan)))
        epoch = self.epoch or ""
        commands = [
            ("EVALSHA", script.sha, len(keys), *keys, *args, epoch) for _, _, keys, args in plan
        ]

        def send(c: Any) -> Any:
            conn = c.connection_pool.get_connection()
            try:
                conn.send_packed_command(conn.pack_commands(commands))
            except BaseException:
                conn.disconnect()
                c.connection_pool.release(conn)
                raise
            return conn

        return ("sent", self._call("write to", send))

    def _answers(self, sent: Any, plan: list[Any]) -> list[Any]:
        """The answers to a batch _send() sent (an error reply is its exception)."""
        import redis

        kind, what = sent
        if kind == "done":
            return list(what)
        conn, pool = what, self.client.connection_pool
        out: list[Any] = []
        try:
            for _ in plan:
                try:
                    out.append(conn.read_response())
                except redis.ResponseError as exc:
                    out.append(exc)
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        # a Redis that forgot the script (restarted, SCRIPT FLUSH): those shards again,
        # the script loaded on the way
        again = [k for k, r in enumerate(out) if isinstance(r, redis.exceptions.NoScriptError)]
        if again:
            script = self._scripts["record"]
            redo = [plan[k] for k in again]
            for k, r in zip(again, self._run(self.client, script, redo), strict=True):
                out[k] = r
        return out

    def _collect(self) -> None:
        """Read the answer of the batch in flight (if any) and settle it."""
        if self._inflight is None:
            return
        plan, pending, sent = self._inflight
        self._inflight = None
        try:
            results = self._call("write to", lambda c: self._answers(sent, plan))
        except HistoryStoreError:
            self._requeue(pending)
            raise
        self._settle(plan, pending, results)

    def _requeue(self, visits: list[Any]) -> None:
        """Visits not written go back to the front of the buffer, for a retry."""
        self._pending = visits + self._pending
        self._pending_fps = {v[2] for v in self._pending}

    def _settle(self, plan: list[Any], pending: list[Any], results: list[Any]) -> None:
        import redis

        for attempt in range(2):
            lost: list[str | None] = []
            done: set[int] = set()
            newer = {v[2] for v in self._pending}  # recorded since: their predictions stand
            for (shard, idx, _, _), result in zip(plan, results, strict=True):
                if isinstance(result, Exception):
                    if isinstance(result, redis.ResponseError) and str(result).startswith(
                        LOST_ERROR
                    ):
                        lost.append(str(result)[len(LOST_ERROR) :].strip() or None)
                    continue
                done.add(shard)
                uids = np.frombuffer(result[0], dtype="<i4")
                size = ROW_DTYPE.itemsize
                for k, i in enumerate(idx):
                    row = result[1][k * size : (k + 1) * size]
                    fp = pending[i][2]
                    self._learn(fp, int(uids[k]), row, pending[i][4], fp in newer)
            self._writes += 1
            plan = [p for p in plan if p[0] not in done]
            if plan and lost and not attempt:
                try:
                    self._lost(lost[0])  # "stop" raises; "continue": once more, into the fresh one
                except StoreLost:
                    # nothing more is written into a lost store: these visits go with it
                    self._pending, self._pending_fps, self._proposed = [], set(), {}
                    raise
                again = self._scripts["record"]
                results = self._call("write to", lambda c, p=plan, s=again: self._run(c, s, p))
                continue
            self._requeue([pending[i] for p in plan for i in p[1]])
            self._proposed = {k: v for k, v in self._proposed.items() if k in self._pending_fps}
            if not plan:
                return
            first = next(r for r in results if isinstance(r, Exception))
            raise HistoryStoreError(
                f"cannot write to the history store at {self.location} (RECRAWL_STORE): {first}"
            )
        raise AssertionError("unreachable")

    def _run(self, c: Any, script: Any, plan: list[Any]) -> list[Any]:
        """Each shard's script, pipelined: on one Redis, one pipeline; on a cluster (whose
        pipelines refuse scripts), one pipeline per node, on that node's connection."""
        groups: dict[Any, list[int]] = {}
        if hasattr(c, "get_node_from_key"):
            for k, (_, _, keys, _) in enumerate(plan):
                groups.setdefault(c.get_node_from_key(keys[0]).redis_connection, []).append(k)
        else:
            groups[c] = list(range(len(plan)))
        out: list[Any] = [None] * len(plan)
        for conn, ks in groups.items():
            pipe = conn.pipeline(transaction=False)
            for k in ks:
                _, _, keys, args = plan[k]
                script(keys=keys, args=[*args, self.epoch or ""], client=pipe)
            for k, result in zip(ks, pipe.execute(raise_on_error=False), strict=True):
                out[k] = result
        return out

    def _learn(
        self,
        fp: bytes,
        uid: int,
        row: bytes,
        lazy: tuple[PendingRecord, Visit] | None = None,
        newer: bool = False,
    ) -> None:
        """The server's fold of a URL's visit: the record the next prediction starts
        from (decoded then: most URLs are not visited again by the same process soon),
        unless a newer visit of it is buffered (its prediction already folds this one);
        and the PendingRecord record() returned for it, if any, filled in."""
        cached = self._cache.get(fp)
        if cached is not None and not newer:
            self._cache[fp] = (cached[0], cached[1], (uid, row))
        if lazy is None:
            return
        pending, visit = lazy
        if cached is None and not newer:  # what the next prediction of this URL starts from
            base = UrlRecord(id=uid, url=visit.url, fingerprint=fp, first_seen=0.0, first_cycle=0)
            base.etag, base.last_modified = visit.etag, visit.last_modified
            base.signature = visit.signature
            self._remember(fp, base, visit.signature is not None)
            self._cache[fp] = (base, visit.signature is not None, (uid, row))
        pending._fill(uid, row, visit)

    # -- reads (each flushes first: a process reads its own writes) --------------------

    def __len__(self) -> int:
        self.flush()

        def count(c: Any) -> int:
            pipe = c.pipeline(transaction=False)
            for s in range(self.shards):
                pipe.hget(self.layout.shard(s, "meta"), "urls")
            return sum(int(x or 0) for x in pipe.execute())

        return int(self._call("read", count))

    def knows(self, fingerprint: bytes) -> bool:
        if fingerprint in self._pending_fps:
            return True
        shard, bucket, field = self.layout.locate(fingerprint)
        key = self.layout.bucket(shard, bucket)
        return bool(self._call("read", lambda c: c.hexists(key, field)))

    def _get_raw(self, fingerprint: bytes, signature: bool, body: bool) -> Any:
        if fingerprint in self._pending_fps:
            self.flush()
        script = self._script("get")
        shard, bucket, field = self.layout.locate(fingerprint)
        names = ("rows", "blobs", "bigreq", "etag", "lastmod", "sig", "body")
        keys = [self.layout.bucket(shard, bucket)] + [self.layout.shard(shard, n) for n in names]
        args = [field, self.shards, int(signature), int(body)]
        return self._call("read", lambda c: script(keys=keys, args=args, client=c))

    def get(self, fingerprint: bytes, *, signature: bool = True) -> UrlRecord | None:
        raw = self._get_raw(fingerprint, signature, False)
        if not raw:
            self._cache.pop(fingerprint, None)
            return None
        uid, row, data, etag, lastmod, sig, _ = raw
        url = self._url_of(data, int(uid))
        rec = _record_from(int(uid), fingerprint, row, url, etag, lastmod, sig)
        self._remember(fingerprint, _clone(rec), signature)
        return rec

    def _url_of(self, data: bytes | None, uid: int) -> str:
        if not data:
            return ""
        try:
            return url_from(split_blob(data)[0], self._host)
        except (ValueError, struct.error, IndexError):
            self._unreadable(uid, "blob")
            return ""

    def _unreadable(self, uid: int, what: str) -> None:
        self.unreadable_values += 1
        logger.warning(
            "recrawl: the %s of URL id %d in the history store at %s (key %r) is not one "
            "this scrapy-recrawl wrote, skipped",
            what,
            uid,
            self.location,
            self.key,
        )

    def body(self, fingerprint: bytes) -> StoredBody | None:
        raw = self._get_raw(fingerprint, False, True)
        if not raw or raw[6] is None:
            return None
        data = raw[6]
        try:
            status, hlen = struct.unpack_from("<HI", data)
            headers = json.loads(data[6 : 6 + hlen])
            body = zlib.decompress(data[6 + hlen :])
            if not isinstance(headers, dict):
                raise ValueError("headers are not a map")
        except (struct.error, ValueError, zlib.error) as exc:
            self.unreadable_values += 1
            logger.warning(
                "recrawl: the stored body of URL id %d in the history store at %s is not a "
                "stored body, skipped: %s",
                int(raw[0]),
                self.location,
                exc,
            )
            return None
        return StoredBody(status=status, headers=headers, body=body)

    def _blobs(self, ids: list[int]) -> list[bytes | None]:
        """The blobs of these URL ids (None: no such URL), in order. The blob locations
        come from the last :meth:`rows` snapshot when nothing was written since (blobs are
        append-only: a location stays valid), else from the rows; each shard's blobs are
        read whole when that is cheaper than one GETRANGE per URL."""
        self.flush()
        out: list[bytes | None] = [None] * len(ids)
        by_shard: dict[int, list[int]] = {}
        for k, uid in enumerate(ids):
            if uid >= 1:
                by_shard.setdefault((uid - 1) % self.shards, []).append(k)
        snap = self._snapshot[1] if self._snapshot and self._snapshot[0] == self._writes else None

        def read(c: Any) -> None:
            for shard, ks in by_shard.items():
                local = np.array([(ids[k] - 1) // self.shards for k in ks], dtype=np.int64)
                if snap is not None and len(snap) and local.max() < snap.shape[0]:
                    loc = snap[local, shard]
                    lens, offs = loc["req_len"].astype(np.int64), loc["req_off"].astype(np.int64)
                else:
                    pipe = c.pipeline(transaction=False)
                    rows = self.layout.shard(shard, "rows")
                    for j in local.tolist():
                        pipe.getrange(
                            rows, j * ROW_DTYPE.itemsize + 33, j * ROW_DTYPE.itemsize + 38
                        )
                    raw = [r if len(r) == 6 else b"\0" * 6 for r in pipe.execute()]
                    arr = np.frombuffer(b"".join(raw), dtype=[("l", "<u2"), ("o", "<u4")])
                    lens, offs = arr["l"].astype(np.int64), arr["o"].astype(np.int64)
                self._read_blobs(c, shard, ks, ids, lens, offs, out)

        self._call("read", read)
        return out

    def _read_blobs(
        self,
        c: Any,
        shard: int,
        ks: list[int],
        ids: list[int],
        lens: np.ndarray,
        offs: np.ndarray,
        out: list[bytes | None],
    ) -> None:
        key = self.layout.shard(shard, "blobs")
        small = [j for j in range(len(ks)) if 0 < lens[j] < BIG_BLOB]
        big = [j for j in range(len(ks)) if lens[j] == BIG_BLOB]
        if big:
            vals = c.hmget(self.layout.shard(shard, "bigreq"), [ids[ks[j]] for j in big])
            for j, v in zip(big, vals, strict=True):
                out[ks[j]] = v
        if not small:
            return
        size = int(c.strlen(key))
        if size < 1000 * len(small):  # one GETRANGE per URL costs ~ reading 1 KB
            pipe = c.pipeline(transaction=False)
            for start in range(0, size, READ_CHUNK):
                pipe.getrange(key, start, min(size, start + READ_CHUNK) - 1)
            whole = b"".join(pipe.execute())
            for j in small:
                out[ks[j]] = whole[offs[j] : offs[j] + lens[j]]
        else:
            pipe = c.pipeline(transaction=False)
            for j in small:
                pipe.getrange(key, int(offs[j]), int(offs[j] + lens[j] - 1))
            for j, v in zip(small, pipe.execute(), strict=True):
                out[ks[j]] = v

    def _shape(self, sid: int) -> Any:
        if sid not in self._shapes:
            data = self._call("read", lambda c: c.hget(self._k("dict"), sid))
            self._shapes[sid] = (
                None
                if data is None
                else self._decode(data, f"request shape {sid} of {self._k('dict')}")
            )
        return self._shapes[sid]

    def requests(self, ids: Iterable[int] | np.ndarray) -> list[dict[str, Any] | None]:
        wanted = [int(i) for i in ids]
        out: list[dict[str, Any] | None] = []
        for uid, data in zip(wanted, self._blobs(wanted), strict=True):
            if data is None:
                out.append(None)
                continue
            try:
                part, sid, inline = split_blob(data)
                url = url_from(part, self._host)
            except (ValueError, struct.error, IndexError):
                self._unreadable(uid, "blob")
                out.append(None)
                continue
            if sid:
                shape = self._shape(sid)
                d = None if shape is None else _copy(shape)
            elif inline is not None:
                d = self._decode(inline, f"the request of URL id {uid}")
            else:
                d = None
            if d is not None and d.get("url") == "":
                d["url"] = url
            out.append(d)
        return out

    def _decode(self, data: bytes, what: str) -> dict[str, Any] | None:
        d = decode_stored(data, f"{what} in the history store at {self.location}")
        if d is None:
            self.unreadable_values += 1
        return d

    def urls(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        wanted = [int(i) for i in ids]
        found = self._blobs(wanted)
        missing = [i for i, u in zip(wanted, found, strict=True) if u is None]
        if missing:
            raise HistoryStoreError(f"history store {self.location}: no URL ids {missing[:5]}")
        return [self._url_of(data, uid) for uid, data in zip(wanted, found, strict=True)]

    def rows(self) -> tuple[np.ndarray, int]:
        """Every URL's row (structured :data:`ROW_DTYPE`, row i = id i + 1; ``flags`` bit
        :data:`~.redis_schema.PRESENT` 0: no URL) and the cycle.

        Each shard's row string is read in ``READ_CHUNK`` slices (one pipeline per
        shard) and copied once into a ``[rows, shards]`` array whose row-major order is
        the id order: no key per URL, no Python loop per URL, no concatenation of
        growing buffers.
        """
        self.flush()

        def read(c: Any) -> tuple[np.ndarray, int]:
            pipe = c.pipeline(transaction=False)
            pipe.get(self._k("cycle"))
            for s in range(self.shards):
                pipe.strlen(self.layout.shard(s, "rows"))
            cycle, *sizes = pipe.execute()
            size = ROW_DTYPE.itemsize
            counts = [int(n) // size for n in sizes]
            table = np.zeros((max(counts, default=0), self.shards), dtype=ROW_DTYPE)
            for s, count in enumerate(counts):
                if not count:
                    continue
                key, end = self.layout.shard(s, "rows"), count * size
                pipe = c.pipeline(transaction=False)
                for start in range(0, end, READ_CHUNK):
                    pipe.getrange(key, start, min(start + READ_CHUNK, end) - 1)
                parts = pipe.execute()
                column = table[:count, s]
                pos = 0
                for part in parts:
                    n = len(part) // size
                    column[pos : pos + n] = np.frombuffer(part, dtype=ROW_DTYPE, count=n)
                    pos += n
                del parts
            # the blobs' locations, for requests() and urls() of this snapshot's ids
            locations = np.empty(table.shape, dtype=[("req_len", "<u2"), ("req_off", "<u4")])
            locations["req_len"], locations["req_off"] = table["req_len"], table["req_off"]
            self._snapshot = (self._writes, locations)
            return table.reshape(-1), self._int(cycle, "cycle")

        return self._call("read", read)

    def arrays(self) -> HistoryArrays:
        table, cycle = self.rows()
        flags = table["flags"]
        keep = np.flatnonzero(flags & PRESENT)
        table = table[keep]
        flags = flags[keep]
        columns = {
            "n": table["n"].astype(np.int64),
            "X": table["X"].astype(np.int64),
            "sad": ((flags & SAD) > 0).astype(np.float64),
            "aad_sum": np.ascontiguousarray(table["aad_sum"]),
            "gad": np.ascontiguousarray(table["gad"]),
            "last_visit_cycle": table["last_visit_cycle"].astype(np.int64),
            "last_visit_time": np.ascontiguousarray(table["last_visit_time"]),
            "D": _counts(table["D"]),
            "A": _counts(table["A"]),
            "R": _counts(table["R"]),
            "M": _counts(table["M"]),
            "gone": (flags & GONE) > 0,
            "failures": table["failures"].astype(np.int64),
            "last_failure_cycle": table["last_failure_cycle"].astype(np.int64),
            "first_cycle": table["first_cycle"].astype(np.int64),
            "last_change_cycle": table["last_change_cycle"].astype(np.int64),
        }
        return HistoryArrays(ids=keep.astype(np.int64) + 1, columns=columns, cycle=cycle)

    def visit_log(
        self, url_ids: Iterable[int] | None = None, *, since_cycle: int | None = None
    ) -> dict[str, np.ndarray]:
        """The visit log (oldest first: each shard's log, merged by the entries'
        ``order``) as numpy columns; ``changed`` is -1 for no observation.

        ``since_cycle``: only the cycles from that one on (each shard's log read from its
        first entry of those cycles, ``{p#s}:logstart``, not from its start).
        """
        self.flush()

        def first_entry(c: Any, shard: int, cur: int) -> str | None:
            cycles = list(range(max(0, since_cycle or 0), cur + 1))
            key = self.layout.shard(shard, "logstart")
            starts = [s for s in c.hmget(key, cycles) if s] if cycles else []
            if not starts:
                return None
            return min(starts, key=lambda s: tuple(int(x) for x in s.split(b"-"))).decode()

        def read(c: Any) -> bytes:
            parts: list[bytes] = []
            cur = self._int(c.get(self._k("cycle")), "cycle")
            for shard in range(self.shards):
                start: str | None = "-"
                if since_cycle is not None:
                    start = first_entry(c, shard, cur)
                key = self.layout.shard(shard, "log")
                while start is not None:
                    batch = c.xrange(key, min=start, max="+", count=50_000)
                    if not batch:
                        break
                    parts.extend(fields[b"v"] for _, fields in batch)
                    ms, seq = batch[-1][0].decode().split("-")
                    start = f"{ms}-{int(seq) + 1}" if len(batch) == 50_000 else None
            return b"".join(parts)

        table = np.frombuffer(self._call("read", read), dtype=LOG_DTYPE)
        table = table[np.argsort(table["order"], kind="stable")]
        if since_cycle is not None:
            table = table[table["cycle"] >= since_cycle]
        if url_ids is not None:
            table = table[np.isin(table["url_id"], np.fromiter(url_ids, dtype=np.int64))]
        return {
            name: table[name].astype(np.float64 if name == "time" else np.int64)
            for name in LOG_DTYPE.names or ()
            if name != "order"
        }

    # -- whose history (the ``spider`` field of {p}:meta, schema version 3) -----

    def owner(self) -> str | None:
        name = self._call("read", lambda c: c.hget(self._k("meta"), "spider"))
        return name.decode() if name is not None else None

    def claim(self, spider: str) -> str:
        def claim(c: Any) -> Any:
            pipe = c.pipeline()  # MULTI/EXEC: the first claim wins, every process sees it
            pipe.hsetnx(self._k("meta"), "spider", spider)
            pipe.hget(self._k("meta"), "spider")
            return pipe.execute()[1]

        owner = bytes(self._call("write to", claim)).decode()
        self._claimed = owner
        return owner

    def unclaimed_at(self, prefix: str) -> bool:
        """Whether the same Redis holds a store nobody owns under ``prefix`` (the
        shared one an earlier release kept under ``recrawl``); nothing is written."""
        for meta in (Layout(prefix, 1).store("meta"), f"{prefix}:meta"):
            version, owner = self._call(
                "read", lambda c, m=meta: c.hmget(m, ["schema_version", "spider"])
            )
            if version is not None:
                return owner is None
        return False

    # -- the frontier --------------------------------------------------------

    def _frontier_keys(self) -> list[str]:
        return [self._k(n) for n in ("frontier", "frontier:fp", "frontier:req", "frontier:seq")]

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        args: list[Any] = []
        for fp, request, priority in items:
            data = encode_stored(request)
            if data is not None:  # not plain data: cannot be kept
                args.extend((fp, int(priority), data))
        script = self._script("push_frontier")
        added = 0
        keys = self._frontier_keys()
        for start in range(0, len(args), 3 * 1000):
            chunk = args[start : start + 3 * 1000]
            added += int(
                self._call("write to", lambda c, a=chunk: script(keys=keys, args=a, client=c))
            )
        return added

    def pop_frontier(self, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        script = self._script("pop_frontier")
        keys = self._frontier_keys()[:3]
        blobs = self._call("write to", lambda c: script(keys=keys, args=[int(limit)], client=c))
        what = f"an entry of {self._k('frontier:req')}"
        out = [self._decode(b, what) for b in blobs if b is not None]
        return [d for d in out if d is not None]

    def frontier_size(self) -> int:
        return int(self._call("read", lambda c: c.zcard(self._k("frontier"))))

    # -- side storage (what plug-ins keep) ---------------------------------------

    def _side(self, table: str) -> str:
        return self._k(f"side:{check_table(table)}")

    def side_get(self, table: str, keys: Sequence[int]) -> list[bytes | None]:
        key, wanted = self._side(table), [int(k) for k in keys]
        out: list[bytes | None] = []
        for start in range(0, len(wanted), 10_000):
            chunk = wanted[start : start + 10_000]
            if chunk:
                out.extend(self._call("read", lambda c, chunk=chunk: c.hmget(key, chunk)))
        return out

    def side_put(self, table: str, items: Sequence[tuple[int, bytes]]) -> None:
        # a guarded script, as every write: no epoch round trip first, no gap after it
        script, key = self._script("side_put"), self._side(table)
        for start in range(0, len(items), 10_000):
            args = [x for k, v in items[start : start + 10_000] for x in (int(k), bytes(v))]
            self._call("write to", lambda c, a=args: script(keys=[key], args=a, client=c))

    def side_delete(self, table: str, keys: Sequence[int]) -> None:
        script, key = self._script("side_delete"), self._side(table)
        wanted = [int(k) for k in keys]
        for start in range(0, len(wanted), 10_000):
            chunk = wanted[start : start + 10_000]
            self._call("write to", lambda c, a=chunk: script(keys=[key], args=a, client=c))

    def side_items(self, table: str) -> Iterator[tuple[int, bytes]]:
        key = self._side(table)
        items = self._call("read", lambda c: dict(c.hscan_iter(key, count=1000)))
        # a field that is no int was not written by a store (the Redis is shared): skipped
        keyed = {int(k): v for k, v in items.items() if _INT_FIELD.fullmatch(bytes(k))}
        for k in sorted(keyed):
            yield k, bytes(keyed[k])

    def side_push(self, table: str, key: int, item: bytes, keep: int) -> list[bytes]:
        script, name = self._script("side_push"), self._side(table)
        old = self._call(
            "write to",
            lambda c: script(keys=[name], args=[int(key), bytes(item), int(keep)], client=c),
        )
        return unpack_list(old)

    def change_window(
        self, ids: Iterable[int] | np.ndarray, window: int, table: np.ndarray | None = None
    ) -> np.ndarray:
        """``[len(ids), window]`` of the last change observations, newest first (NaN: none),
        from the rows' ``cwin`` byte (``table``: rows already read by :meth:`rows`)."""
        if table is None:
            table = self.rows()[0]
        idx = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
        cw = np.zeros(len(idx), dtype=np.int64)
        ok = (idx >= 1) & (idx <= len(table))
        cw[ok] = table["cwin"][idx[ok] - 1]
        return window_from_bits(cw, window)

    # -- maintenance -----------------------------------------------------------

    def clear(self) -> None:
        """Delete this store's keys (``scrapy recrawl-reset``) and what is buffered,
        leaving an empty store at cycle 0 (same shard count). Only the keys of its
        hash tags: another spider's ``recrawl:<name>`` is left alone."""
        from .redis_bulk import delete_store_keys

        if self._inflight is not None:  # its answer first (it goes with the history)
            try:
                self._collect()
            except HistoryStoreError:
                pass
        token, created = new_epoch()

        def delete(c: Any) -> None:
            delete_store_keys(c, self.layout)
            # a new epoch: a crawl still writing into the old history notices (epoch.py)
            meta = {
                "schema_version": SCHEMA_VERSION,
                "shards": self.shards,
                "epoch": token,
                "epoch_created": repr(created),
            }
            self._mark_shards(c, token, overwrite=True)
            c.hset(self._k("meta"), mapping={**meta, "shards_marked": 1})

        claimed = self._claimed
        self._reset_buffers()
        self._call("write to", delete)
        self._claimed = claimed
        self.epoch, self.epoch_created, self._last_cycle = token, created, 0


def _counts(column: np.ndarray) -> np.ndarray:
    """A u16 count column as floats, NaN where there is none yet (NO_COUNT)."""
    return np.where(column == NO_COUNT, np.nan, column.astype(np.float64))


#: one row as Python's struct reads it (ROW_DTYPE's fields in order: a record's numbers
#: without numpy, for the one-URL paths)
_ROW = struct.Struct("<iiiiiiiHBBBHIdddddHHHH")
assert _ROW.size == ROW_DTYPE.itemsize


def _count(value: int) -> float:
    return float("nan") if value == NO_COUNT else float(value)


def _numbers(rec: UrlRecord, row: bytes) -> None:
    """Set a record's numbers from one row of :data:`ROW_DTYPE`."""
    (
        rec.n,
        rec.X,
        rec.visits,
        rec.last_visit_cycle,
        rec.last_change_cycle,
        rec.first_cycle,
        rec.last_failure_cycle,
        rec.status,
        rec.failures,
        flags,
        rec.cwin,
        _req_len,
        _req_off,
        rec.aad_sum,
        rec.gad,
        rec.last_visit_time,
        rec.last_change_time,
        rec.first_seen,
        d,
        a,
        r,
        m,
    ) = _ROW.unpack(row)
    rec.sad = float(bool(flags & SAD))
    rec.D, rec.A, rec.R, rec.M = _count(d), _count(a), _count(r), _count(m)
    rec.gone = bool(flags & GONE)
    rec.has_body = bool(flags & HAS_BODY)


def _clone(rec: UrlRecord) -> UrlRecord:
    """A shallow copy of a plain record (what copy.copy gives, without its machinery)."""
    new = object.__new__(UrlRecord)
    new.__dict__.update(rec.__dict__)
    return new


def _record_from(
    uid: int,
    fingerprint: bytes,
    row: bytes,
    url: str,
    etag: bytes | None,
    lastmod: bytes | None,
    sig: bytes | None,
) -> UrlRecord:
    rec = UrlRecord(id=uid, url=url, fingerprint=fingerprint, first_seen=0.0, first_cycle=0)
    _numbers(rec, row)
    rec.etag, rec.last_modified, rec.signature = _validator(etag), _validator(lastmod), sig
    return rec


_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(UrlRecord))
#: what a visit alone does not say of the record it makes (a 304 keeps the validators it
#: leaves out; a visit without a signature keeps the stored one): read when looked at
_STORED_FIELDS = frozenset({"etag", "last_modified", "signature"})


class PendingRecord(UrlRecord):
    """What :meth:`RedisHistoryStore.record` returns for a URL the process has neither
    read nor written: a :class:`UrlRecord` the store fills in from the server's own fold
    of the visit when it flushes it. Looking at a field before then flushes first, so a
    caller that never looks (the usual case) costs no round trip, and one that does gets
    the record the visit made, exactly. Compares equal to the plain record it stands for;
    ``copy.copy()`` gives that plain record."""

    def __init__(self, store: RedisHistoryStore, fingerprint: bytes) -> None:
        # not UrlRecord.__init__: the fields are set when the visit is flushed
        object.__setattr__(self, "_store", store)
        # 0 waiting for the flush; 1 flushed; 2 decoded; 3 the stored fields read too
        object.__setattr__(self, "_state", 0)
        object.__setattr__(self, "_fp", fingerprint)

    def __getattribute__(self, name: str) -> Any:
        if name in _RECORD_FIELDS:
            state = object.__getattribute__(self, "_state")
            if state < 2 or (state == 2 and name in _STORED_FIELDS):
                object.__getattribute__(self, "_complete")()
        return object.__getattribute__(self, name)

    def _fill(self, uid: int, row: bytes, visit: Visit) -> None:
        """Called by the store's flush with the server's fold of the visit (decoded when
        looked at: most results of record() never are)."""
        object.__setattr__(self, "_row", (uid, row, visit))
        object.__setattr__(self, "_state", 1)

    def _decode(self) -> None:
        uid, row, visit = object.__getattribute__(self, "_row")
        fp = object.__getattribute__(self, "_fp")
        rec = _record_from(uid, fp, row, visit.url, None, None, visit.signature)
        good = good_status(visit.status)
        if good and visit.status != 304:  # the visit's validators replaced the stored ones
            rec.etag, rec.last_modified = visit.etag, visit.last_modified
        for name in _RECORD_FIELDS:
            object.__setattr__(self, name, object.__getattribute__(rec, name))
        exact = good and visit.status != 304 and visit.signature is not None
        object.__setattr__(self, "_state", 3 if exact else 2)

    def _complete(self) -> None:
        store = object.__getattribute__(self, "_store")
        if object.__getattribute__(self, "_state") == 0:
            store.flush()  # fills this record (or raises: the visit stays buffered)
            if object.__getattribute__(self, "_state") == 0:
                raise HistoryStoreError(
                    f"history store {store.location}: a visit of this URL was not written "
                    "(the store was lost and started afresh)"
                )
        if object.__getattribute__(self, "_state") == 1:
            object.__getattribute__(self, "_decode")()
        if object.__getattribute__(self, "_state") == 2:
            stored = store.get(object.__getattribute__(self, "_fp"), signature=True)
            if stored is not None:
                for name in _STORED_FIELDS:
                    object.__setattr__(self, name, getattr(stored, name))
            object.__setattr__(self, "_state", 3)

    def record(self) -> UrlRecord:
        """The plain :class:`UrlRecord` (flushing first if needed)."""
        return UrlRecord(**{name: getattr(self, name) for name in _RECORD_FIELDS})

    def __copy__(self) -> UrlRecord:
        return self.record()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UrlRecord):  # as the dataclass compares: field by field, in order
            return tuple(getattr(self, f.name) for f in dataclasses.fields(UrlRecord)) == tuple(
                getattr(other, f.name) for f in dataclasses.fields(UrlRecord)
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as UrlRecord's


class _Guarded:
    """A registered write script of the store's own slot, called with the store's meta
    key and epoch appended (redis_schema.guarded); a refusal is the store's loss
    (``RedisHistoryStore._lost``), and under "continue" the write is made once more,
    into the fresh history."""

    def __init__(self, store: RedisHistoryStore, script: Any) -> None:
        self.store = store
        self.script = script

    def __call__(
        self,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        client: Any = None,
        meta: Any = None,
    ) -> Any:
        """``meta``: the meta hash whose epoch guards it (default the store's; a shard's
        own for a key of that shard's slot)."""
        import redis

        for _ in range(2):
            try:
                return self.script(
                    keys=[*keys, meta or self.store._k("meta")],
                    args=[*args, self.store.epoch or ""],
                    client=client,
                )
            except redis.ResponseError as exc:
                message = str(exc)
                if not message.startswith(LOST_ERROR):
                    raise
                self.store._lost(message[len(LOST_ERROR) :].strip() or None)
        raise StoreLost(self.store.location, self.store.key, self.store.epoch, None, None)
