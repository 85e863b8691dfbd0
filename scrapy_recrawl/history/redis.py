"""The distributed history store: per-URL state and the visit log in Redis.

Many crawler processes (on many machines) share one store, on one Redis or on a Redis
Cluster (``client=`` a redis-py ``RedisCluster``: the one code path serves both).
docs/distributed.md, "The history store's encoding", says what each byte is; in short
(the layout of schema version 5, :mod:`.redis_schema`):

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
round trip. The script folds each visit server-side (lua/history_record.lua, the rule
of :func:`~scrapy_recrawl.history.state.observe` with the same floating-point
operations in the same order), so N processes never lose an update and a URL's row is
never ahead of its shard's log. A flush happens every ``flush_every`` visits, every
``flush_seconds``, on the middleware's idle timer (``RECRAWL_FLUSH_SECONDS``), before
any read (read your own writes) and on close; a failed flush keeps the buffer.

This class is the store's face (the :class:`~.base.HistoryStore` contract); the work is
done by its parts, one job each: :mod:`.redis_session` (connection, schema version and
:mod:`.redis_migrate`, epoch and loss), :mod:`.redis_ids` (URL ids, dictionaries),
:mod:`.redis_writer` (the buffer, :mod:`.redis_pipeline` the round trip),
:mod:`.redis_reader` (one URL), :mod:`.redis_scan` (every URL, the log),
:mod:`.redis_side` (owner, frontier, side storage), :mod:`.redis_lease` (the crawl lease).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from . import redis_migrate
from .base import HistoryArrays, HistoryStoreError, StoredBody, UrlRecord, Visit
from .epoch import StoreLost, new_epoch
from .redis_bulk import delete_pre_release_keys, delete_store_keys
from .redis_ids import IdAllocator
from .redis_lease import StoreLease
from .redis_reader import PointReader
from .redis_record import PendingRecord
from .redis_scan import BulkReader
from .redis_schema import DEFAULT_SHARDS, Layout
from .redis_session import RedisSession
from .redis_side import StoreKeys
from .redis_writer import VisitWriter

__all__ = ["PendingRecord", "RedisHistoryStore"]


class RedisHistoryStore:
    """The history store in Redis, shared by many crawler processes (module docstring).

    ``url``: a ``redis://``, ``rediss://`` or ``unix://`` URL (``RECRAWL_STORE``);
    ``settings``: where scrapy-redis's settings point (``REDIS_URL``, ``REDIS_PARAMS``,
    ...; with ``url``, its ``REDIS_PARAMS`` apply); ``connection``: plain redis-py
    arguments instead (scrapy_recrawl/redis_settings.py makes them from settings);
    ``client``: a client of the caller's (kept open at close). ``read_only``: an offline
    reader's: the store is never created, upgraded, claimed or written (a write raises
    HistoryStoreError naming the store).
    """

    #: optional capabilities declared (history/base.py): an epoch fence and a crawl lease
    capabilities: frozenset[str] = frozenset({"fenced"})

    def __init__(
        self,
        url: str | None = None,
        *,
        settings: Any = None,
        connection: Mapping[str, Any] | None = None,
        source: str = "RECRAWL_STORE",
        key: str = "recrawl",
        store_bodies: bool = True,
        log_maxlen: int = 10_000_000,
        client: Any = None,
        on_loss: str = "stop",
        shards: int = DEFAULT_SHARDS,
        flush_every: int = 1000,
        flush_seconds: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
        read_only: bool = False,
    ) -> None:
        self.key = key
        #: the store's short name for messages and the report: its key prefix
        self.label = key
        self._session = RedisSession(
            key,
            url=url,
            settings=settings,
            connection=connection,
            source=source,
            client=client,
            shards=shards,
            on_loss=on_loss,
            read_only=read_only,
        )
        self._ids = IdAllocator(self._session)
        self._writer = VisitWriter(
            self._session,
            self._ids,
            get=lambda fp: self.get(fp, signature=True),
            store_bodies=store_bodies,
            log_maxlen=log_maxlen,
            flush_every=flush_every,
            flush_seconds=flush_seconds,
            monotonic=monotonic,
        )
        self._point = PointReader(self._session, self._ids, self._writer)
        self._bulk = BulkReader(self._session, self._ids, self._writer, self._point)
        self._side = StoreKeys(self._session)
        self._lease = StoreLease(self._session)
        self._session.on_fresh = self._fresh

    @classmethod
    def from_settings(
        cls, settings: Any, url: str | None = None, **options: Any
    ) -> RedisHistoryStore:
        return cls(url, settings=settings, **options)

    # -- what the store is -----------------------------------------------------

    @property
    def location(self) -> str:
        """Where the store is, for messages (its Redis, password left out)."""
        return self._session.location

    @location.setter
    def location(self, value: str) -> None:
        self._session.location = value

    @property
    def read_only(self) -> bool:
        """Opened for reading only: never created, upgraded, claimed or written."""
        return self._session.read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self._session.read_only = bool(value)

    @property
    def store_bodies(self) -> bool:
        """Whether good responses' bodies are kept (to answer 304s)."""
        return self._writer.store_bodies

    @store_bodies.setter
    def store_bodies(self, value: bool) -> None:
        self._writer.store_bodies = bool(value)

    @property
    def log_maxlen(self) -> int:
        return self._writer.log_maxlen

    @property
    def flush_every(self) -> int:
        return self._writer.flush_every

    @property
    def flush_seconds(self) -> float:
        return self._writer.flush_seconds

    @property
    def new_shards(self) -> int:
        """Shards of a store this process creates (an existing one keeps its own)."""
        return self._session.new_shards

    @property
    def client(self) -> Any:
        return self._session.client

    @property
    def _client(self) -> Any:
        """The client while the store is open (None when it is not)."""
        return self._session._client

    @property
    def layout(self) -> Layout:
        return self._session.layout

    @property
    def shards(self) -> int:
        return self._session.shards

    @property
    def unreadable_values(self) -> int:
        """Stored values read back that were not data (skipped): the stat
        ``recrawl/unreadable_values``."""
        return self._session.unreadable

    @unreadable_values.setter
    def unreadable_values(self, value: int) -> None:
        self._session.unreadable = int(value)

    @property
    def buffered_visits(self) -> int:
        return self._writer.buffered_visits

    # -- the fence (history/epoch.py): epoch, loss, lease ---------------------------

    @property
    def epoch(self) -> str | None:
        """The identity of the store this process opened (None: not open)."""
        return self._session.epoch

    @property
    def epoch_created(self) -> float | None:
        return self._session.epoch_created

    @property
    def on_loss(self) -> str:
        """RECRAWL_ON_STORE_LOSS: "stop" or "continue" (history/epoch.py)."""
        return self._session.on_loss

    @property
    def on_lost(self) -> Callable[[StoreLost], None] | None:
        """Called with the StoreLost before it is raised ("stop"); the crawl sets it."""
        return self._session.on_lost

    @on_lost.setter
    def on_lost(self, hook: Callable[[StoreLost], None] | None) -> None:
        self._session.on_lost = hook

    @property
    def holder(self) -> str | None:
        """This process's field of the crawl lease (None: not held)."""
        return self._lease.holder

    def check_epoch(self) -> None:
        """Raise :class:`StoreLost` if the store (or one of its shards) is no longer the
        one this process opened (vanished or replaced); with ``on_loss="continue"``, warn
        and go on with a fresh history instead. A held lease is stamped again."""
        self._session.check_epoch()
        self._lease.stamp()  # the store is this crawl's: its lease goes on

    def hold(self, seconds: float) -> str:
        """Hold the store's crawl lease (redis_lease.StoreLease.hold): returns the
        holder id (``host:pid:token``)."""
        return self._lease.hold(seconds)

    def holders(self, timeout: float) -> dict[str, dict[str, Any]]:
        """The crawls holding the store now (``scrapy recrawl-reset`` refuses while there
        are any), stamped within ``timeout`` seconds of the Redis's time, by holder id."""
        return self._lease.holders(timeout)

    def _fresh(self) -> None:
        """After a loss under "continue": what this process knew of the old history is
        gone; what its buffered visits name is written into the fresh one."""
        self._writer.cache.clear()
        self._ids.write_again()

    # -- lifecycle ---------------------------------------------------------

    def open(self) -> None:
        self._session.open()

    def close(self) -> None:
        if self._session._client is None:
            return
        try:
            self.flush()  # a failure raises, and keeps the buffer and the connection
        except StoreLost:
            if self.on_lost is None:
                raise
            # a crawl's store: its hook said so in one line and stopped the crawl; the
            # visits went with the store
        client = self._session.close()
        self._lease.release(client)  # a clean close: reset may go ahead at once
        self._reset()
        self._session.disconnect(client)

    def _reset(self) -> None:
        self._writer.reset()
        self._ids.reset()
        self._bulk.snapshot = None

    def __enter__(self) -> RedisHistoryStore:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cycles ------------------------------------------------------------

    @property
    def cycle(self) -> int:
        """The shared cycle counter, read from Redis (another process may have moved it)."""
        return self._session.read_cycle()

    def advance_cycle(self) -> int:
        self.flush()  # the visits recorded so far belong to the cycle they were made in
        session = self._session
        script = session.script("advance_cycle")
        key = session.k("cycle")
        cycle = int(session.call("write to", lambda c: script(keys=[key], args=[], client=c)))
        session.last_cycle = max(session.last_cycle, cycle)
        return cycle

    # -- writes: record() buffers, flush() writes ------------------------------------

    #: records kept for predictions (the oldest go first; never one with buffered visits)
    CACHE_SIZE = VisitWriter.CACHE_SIZE

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
        return self._writer.record(visit)

    def flush(self) -> None:
        """Write the buffered visits: one guarded script per shard touched, pipelined
        (one round trip), each visit folded server-side; on return they are in Redis. A
        failure keeps the visits of the shards not written, for a retry."""
        self._writer.flush()

    # -- reads (each flushes first: a process reads its own writes) --------------------

    def __len__(self) -> int:
        return len(self._bulk)

    def knows(self, fingerprint: bytes) -> bool:
        return self._point.knows(fingerprint)

    def get(self, fingerprint: bytes, *, signature: bool = True) -> UrlRecord | None:
        return self._point.get(fingerprint, signature=signature)

    def body(self, fingerprint: bytes) -> StoredBody | None:
        return self._point.body(fingerprint)

    def requests(self, ids: Iterable[int] | np.ndarray) -> list[dict[str, Any] | None]:
        return self._bulk.requests(ids)

    def urls(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        return self._bulk.urls(ids)

    def rows(self) -> tuple[np.ndarray, int]:
        """Every URL's row (:data:`~.redis_schema.ROW_DTYPE`, row i = id i + 1) and the
        cycle (:meth:`.redis_scan.BulkReader.rows`)."""
        return self._bulk.rows()

    def arrays(self) -> HistoryArrays:
        return self._bulk.arrays()

    def visit_log(
        self, url_ids: Iterable[int] | None = None, *, since_cycle: int | None = None
    ) -> dict[str, np.ndarray]:
        """The visit log, oldest first, as numpy columns; ``changed`` is -1 for no
        observation; ``since_cycle``: only the cycles from that one on."""
        return self._bulk.visit_log(url_ids, since_cycle=since_cycle)

    def change_window(
        self, ids: Iterable[int] | np.ndarray, window: int, table: np.ndarray | None = None
    ) -> np.ndarray:
        """``[len(ids), window]`` of the last change observations, newest first (NaN: none),
        from the rows' ``cwin`` byte (``table``: rows already read by :meth:`rows`)."""
        return self._bulk.change_window(ids, window, table)

    # -- whose history (the ``spider`` field of {p}:meta) ------------------------------

    def owner(self) -> str | None:
        return self._side.owner()

    def claim(self, spider: str) -> str:
        return self._side.claim(spider)

    # -- the frontier and side storage ------------------------------------------

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        return self._side.push_frontier(items)

    def pop_frontier(self, limit: int) -> list[dict[str, Any]]:
        return self._side.pop_frontier(limit)

    def frontier_size(self) -> int:
        return self._side.frontier_size()

    def side_get(self, table: str, keys: Sequence[int]) -> list[bytes | None]:
        return self._side.side_get(table, keys)

    def side_put(self, table: str, items: Sequence[tuple[int, bytes]]) -> None:
        self._side.side_put(table, items)

    def side_delete(self, table: str, keys: Sequence[int]) -> None:
        self._side.side_delete(table, keys)

    def side_items(self, table: str) -> Iterator[tuple[int, bytes]]:
        return self._side.side_items(table)

    def side_push(self, table: str, key: int, item: bytes, keep: int) -> list[bytes]:
        return self._side.side_push(table, key, item, keep)

    # -- maintenance -----------------------------------------------------------

    def clear(self) -> None:
        """Delete this store's keys (``scrapy recrawl-reset``) and what is buffered,
        leaving an empty store at cycle 0 (same shard count) with no owner. Only the
        keys of its hash tags: another spider's ``recrawl:<name>`` is left alone. A store
        that :meth:`open` refused (one written by a pre-release build, before or after
        the layout of version 5) can be cleared too: that is how it is reset."""
        session = self._session
        session.writable("clear it")
        if session._client is None:
            session.connect()
        if self._writer.inflight is not None:  # its answer first (it goes with the history)
            try:
                self._writer.collect()
            except HistoryStoreError:
                pass
        token, created = new_epoch()

        def delete(c: Any) -> None:
            delete_store_keys(c, session.layout)
            delete_pre_release_keys(c, self.key)
            # a new epoch: a crawl still writing into the old history notices (epoch.py)
            meta = {
                "schema_version": redis_migrate.TARGET,
                "shards": session.shards,
                "epoch": token,
                "epoch_created": repr(created),
            }
            session.mark_shards(c, token, overwrite=True)
            c.hset(session.k("meta"), mapping={**meta, "shards_marked": 1})

        claimed = session.claimed
        self._reset()
        session.call("write to", delete)
        session.claimed = claimed
        session.epoch, session.epoch_created, session.last_cycle = token, created, 0
