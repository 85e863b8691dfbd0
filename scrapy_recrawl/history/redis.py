"""The distributed history store: per-URL state and the visit log in Redis.

Many crawler processes (on many machines) share one store. Every visit is
folded in by **one Lua script** (:data:`RECORD_LUA`): the per-URL numbers, the
validators, the signature, the request, the body *and* the visit-log entry
change in the same atomic step, so N processes never lose an update and the
per-URL counters are never ahead of the log (a Redis restart replays whole
scripts from the AOF, never half of one).

The estimator update of :func:`scrapy_recrawl.history.state.observe` is written
once more, in that script, with the same floating-point operations in the same
order (``tests/test_redis_store.py`` checks the two agree bit for bit on random
sequences). Doing it server-side, rather than optimistic WATCH/MULTI/EXEC
around a Python ``observe``, costs one round trip per visit instead of three,
and cannot livelock when several processes update the same URL.

Encoding (keys under ``RECRAWL_REDIS_KEY``, default ``%(spider)s:history``: one
history per spider):

``{p}:rows:{shard}``
    The per-URL numbers as fixed-width little-endian rows of
    :data:`ROW_DTYPE` (120 bytes; 112 before schema version 4), row ``id - 1`` of a string of
    ``2**20`` rows per shard. Updated in place by ``SETRANGE``; read back for
    scoring by a few ``GETRANGE`` s of megabytes each straight into numpy, so
    rescoring a million URLs is a handful of round trips, not a million
    ``HGETALL`` s. A hash per URL would cost ~5x the memory and a command per
    URL to read. The byte ``cwin`` keeps the URL's last change observations
    for the ``C1..C5`` terminals: the count (0..5) in its top 3 bits, the
    indicators in its low 5, newest in bit 0 (0 in rows written before it
    was kept: no window yet).
``{p}:ids``  hash fingerprint -> id; ``{p}:next_id`` the id counter.
``{p}:urls`` ``{p}:etag`` ``{p}:lastmod`` ``{p}:sig`` ``{p}:req`` ``{p}:body``
    hashes id -> URL, validators, change signature, request dict (as data:
    :mod:`~scrapy_recrawl.history.request_codec`, schema version 4),
    stored body (``HMGET`` many ids at once).
``{p}:log``
    the visit log, a stream of packed :data:`LOG_DTYPE` entries, capped at
    ``RECRAWL_REDIS_LOG_MAXLEN`` entries (approximate ``MAXLEN ~``; 0: no cap).
``{p}:logstart``
    hash cycle -> id of the first log entry recorded for that cycle
    (``HSETNX`` by the same script), so the last cycles of the log are read
    without reading all of it (the ``Q`` terminal).
``{p}:side:{table}``
    side storage: what plug-ins keep beside the history (content-aware
    prediction's bags and distances, loop-time probes and the basket model),
    one hash key -> bytes per table (:mod:`scrapy_recrawl.history.records`
    says what the bytes are; never a pickle). ``side_push`` is one script
    (:data:`SIDE_PUSH_LUA`), atomic per key.
``{p}:cycle``  the cycle counter (``INCR``).
``{p}:frontier`` (zset) ``{p}:frontier:fp`` ``{p}:frontier:req``
    discovered requests waiting for a cycle with budget (request dicts as data).
``{p}:meta``  schema version, rows per shard, and (schema version 3) ``spider``: the
    spider whose history this is; ``epoch`` and ``epoch_created``: the store's
    identity (history/epoch.py), written when it is created (``HSETNX``: a store of
    an earlier release gets one when first opened; no schema-version step, as
    nothing else changes). Every write script is guarded by it
    (:func:`~scrapy_recrawl.history.redis_schema.guarded`).
"""

from __future__ import annotations

import json
import logging
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .base import (
    SCHEMA_VERSION,
    HistoryArrays,
    HistoryStoreError,
    StoredBody,
    UrlRecord,
    Visit,
)
from .epoch import StoreLost, new_epoch
from .legacy_pickle import BASKET_MODEL_TABLE, MODEL_DROPPED, REQUESTS_DROPPED
from .records import check_table, unpack_list
from .redis_connection import _redis_errors, client_location, redacted, redis_from_settings
from .redis_schema import (
    ADVANCE_CYCLE_LUA,
    GET_LUA,
    LOG_DTYPE,
    LOG_FORMAT,
    LOST_ERROR,
    MIGRATE_1_TO_2_LUA,
    MIGRATE_2_TO_3_LUA,
    POP_FRONTIER_LUA,
    PUSH_FRONTIER_LUA,
    READ_CHUNK,
    RECORD_LUA,
    ROW_DTYPE,
    ROW_FORMAT,
    ROWS_PER_SHARD,
    SIDE_DELETE_LUA,
    SIDE_PUSH_LUA,
    SIDE_PUT_LUA,
    _opt,
    delete_own_keys,
    guarded,
    v4_requests_as_data,
    widen_rows_v3,
)
from .request_codec import decode_stored, encode_stored
from .state import good_status

logger = logging.getLogger("scrapy_recrawl.history")


def _validator(value: bytes | None) -> str | None:
    """A stored ETag / Last-Modified, if it can be a header value (printable ASCII):
    anything else read back is not ours, and is not sent (the page is fetched whole)."""
    if value is None or not all(32 <= b < 127 for b in value):
        return None
    return value.decode("ascii")


# Redis locations whose persistence and eviction settings were looked at (once a process).
_CONFIG_SEEN: set[str] = set()


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
    ) -> None:
        self._url = url
        self._settings = settings
        self.key = key
        self.store_bodies = store_bodies
        self.log_maxlen = int(log_maxlen)
        self._client = client
        if client is not None:
            self.location = client_location(client)
        elif url is not None:
            self.location = redacted(url)
        else:
            # where scrapy-redis's settings point; resolved without connecting
            self.location = redis_from_settings(settings)[1]
        self._rps = ROWS_PER_SHARD
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
        self._last_cycle = 0  # the highest cycle counter seen ("continue" keeps it)

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

    def open(self) -> None:
        if self._client is not None and self._scripts:
            return
        try:
            if self._client is None:
                self._client, location = redis_from_settings(self._settings, self._url)
                if self._url is None:
                    self.location = location
            client = self._client
            client.ping()
            meta = self._k("meta")
            client.hsetnx(meta, "schema_version", SCHEMA_VERSION)
            client.hsetnx(meta, "rows_per_shard", ROWS_PER_SHARD)
            version, rps = client.hmget(meta, ["schema_version", "rows_per_shard"])
        except _redis_errors() as exc:
            self._client = None
            raise HistoryStoreError(
                f"cannot reach the history store at {self.location} (RECRAWL_STORE, "
                f"REDIS_URL): {exc}"
            ) from exc
        try:
            version, rps = int(version), int(rps)
        except (TypeError, ValueError):
            self._client = None
            raise HistoryStoreError(
                f"history store {self.location}: the key {self._k('meta')} does not hold a "
                "schema version this scrapy-recrawl wrote (read as data, not run): point "
                "RECRAWL_STORE or RECRAWL_REDIS_KEY elsewhere"
            ) from None
        if int(version) < SCHEMA_VERSION:
            self._migrate(int(version))
        if int(version) > SCHEMA_VERSION:
            self._client = None
            raise HistoryStoreError(
                f"history store {self.location} (key {self.key!r}) has schema version "
                f"{int(version)}, newer than this scrapy-recrawl understands ({SCHEMA_VERSION}): "
                "upgrade scrapy-recrawl or point RECRAWL_STORE elsewhere"
            )
        self._rps = int(rps)
        self._identify()
        self._check_config()
        # every script that writes is guarded by the epoch (redis_schema.guarded)
        self._scripts = {
            "record": _Guarded(self, client.register_script(guarded(RECORD_LUA))),
            "get": client.register_script(GET_LUA),
            "push_frontier": _Guarded(self, client.register_script(guarded(PUSH_FRONTIER_LUA))),
            "pop_frontier": _Guarded(self, client.register_script(guarded(POP_FRONTIER_LUA))),
            "side_push": _Guarded(self, client.register_script(guarded(SIDE_PUSH_LUA))),
            "side_put": _Guarded(self, client.register_script(guarded(SIDE_PUT_LUA))),
            "side_delete": _Guarded(self, client.register_script(guarded(SIDE_DELETE_LUA))),
            "advance_cycle": _Guarded(self, client.register_script(guarded(ADVANCE_CYCLE_LUA))),
        }

    # -- identity (history/epoch.py) -------------------------------------------

    def _identify(self, *, fresh: bool = False) -> None:
        """Give the store an epoch unless it has one (HSETNX: the first process wins, the
        others adopt it) and remember it. ``fresh``: after a loss ("continue"), also the
        fields a new store starts with, the owner and the cycle counter as they were."""
        token, created = new_epoch()
        meta = self._k("meta")

        def identify(c: Any) -> list[Any]:
            pipe = c.pipeline()  # MULTI/EXEC: token and time come from the same process
            if fresh:
                pipe.hsetnx(meta, "schema_version", SCHEMA_VERSION)
                pipe.hsetnx(meta, "rows_per_shard", self._rps)
                if self._claimed is not None:
                    pipe.hsetnx(meta, "spider", self._claimed)
                pipe.setnx(self._k("cycle"), self._last_cycle)
            pipe.hsetnx(meta, "epoch", token)
            pipe.hsetnx(meta, "epoch_created", repr(created))
            pipe.hmget(meta, ["epoch", "epoch_created"])
            return list(pipe.execute()[-1])

        epoch, when = self._call("write to", identify)
        self.epoch = epoch.decode()
        self.epoch_created = float(when) if when is not None else None

    def check_epoch(self) -> None:
        """Raise :class:`StoreLost` if the store is no longer the one this process opened
        (vanished or replaced); with ``on_loss="continue"``, warn and go on with a fresh
        history instead."""
        found = self._call("read", lambda c: c.hget(self._k("meta"), "epoch"))
        found = found.decode() if found is not None else None
        if found != self.epoch:
            self._lost(found)

    def _lost(self, found: str | None) -> None:
        exc = StoreLost(self.location, self.key, self.epoch, self.epoch_created, found)
        if self.on_loss == "continue":
            old = self.epoch
            self._identify(fresh=True)
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
                config.update(self.client.config_get(name))
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

    def _migrate(self, version: int) -> None:
        """Bring a store of an older schema up to this release's, one script per step
        (each checks the version it starts from: a step runs once, all of it or none)."""
        for step in range(version, SCHEMA_VERSION):
            if step == 1:
                keys = [self._k(n) for n in ("meta", "bags", "dists")]
                keys += [self._side("content_bags"), self._side("content_dists")]
                self._call("migrate", lambda c, k=keys: c.eval(MIGRATE_1_TO_2_LUA, len(k), *k))
            elif step == 2:
                meta = self._k("meta")
                self._call("migrate", lambda c, m=meta: c.eval(MIGRATE_2_TO_3_LUA, 1, m))
            elif step == 3:
                self._call("migrate", self._migrate_3_to_4)

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
        meta = self._k("meta")
        model = self._side(BASKET_MODEL_TABLE)  # a pickle in version 3: dropped, never read
        for _ in range(100):
            with client.pipeline() as pipe:
                try:
                    pipe.watch(meta, self._k("next_id"))
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
        total = int(pipe.get(self._k("next_id")) or 0)
        rps = int(pipe.hget(self._k("meta"), "rows_per_shard") or ROWS_PER_SHARD)
        shards = [self._k(f"rows:{s}") for s in range((total + rps - 1) // rps)]
        if shards:
            pipe.watch(*shards)
        widened = [(key, widen_rows_v3(pipe.get(key) or b"")) for key in shards]
        return [lambda p, key=key, rows=rows: p.set(key, rows) for key, rows in widened]

    def close(self) -> None:
        if self._client is None:
            return
        client, self._client = self._client, None
        self._scripts = {}
        self.epoch = self.epoch_created = None
        if self._url is not None or self._settings is not None:
            client.close()  # ours: release its connections

    def __enter__(self) -> RedisHistoryStore:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _k(self, name: str) -> str:
        return f"{self.key}:{name}"

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

    def flush(self) -> None:
        """Nothing to do: every visit is written when it is recorded."""

    # -- cycles ------------------------------------------------------------

    @property
    def cycle(self) -> int:
        """The shared cycle counter, read from Redis (another process may have moved it)."""
        cycle = self._int(self._call("read", lambda c: c.get(self._k("cycle"))), "cycle")
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
        script = self._script("advance_cycle")
        cycle = int(self._call("write to", lambda c: script(args=[self.key], client=c)))
        self._last_cycle = max(self._last_cycle, cycle)
        return cycle

    # -- reads -------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._call("read", lambda c: c.hlen(self._k("ids"))))

    def knows(self, fingerprint: bytes) -> bool:
        return bool(self._call("read", lambda c: c.hexists(self._k("ids"), fingerprint)))

    def _get_raw(self, fingerprint: bytes, signature: bool, body: bool) -> Any:
        script = self._script("get")
        return self._call(
            "read",
            lambda c: script(
                args=[self.key, fingerprint, int(signature), int(body), self._rps], client=c
            ),
        )

    def get(self, fingerprint: bytes, *, signature: bool = True) -> UrlRecord | None:
        raw = self._get_raw(fingerprint, signature, False)
        if not raw:
            return None
        uid, row, url, etag, lastmod, sig, _ = raw
        return self._record_from(int(uid), fingerprint, row, url, etag, lastmod, sig)

    @staticmethod
    def _record_from(
        uid: int,
        fingerprint: bytes,
        row: bytes,
        url: bytes | str,
        etag: bytes | None,
        lastmod: bytes | None,
        sig: bytes | None,
    ) -> UrlRecord:
        r = np.frombuffer(row, dtype=ROW_DTYPE)[0]
        return UrlRecord(
            id=uid,
            url=url.decode("utf-8", "surrogateescape") if isinstance(url, bytes) else url,
            fingerprint=fingerprint,
            first_seen=float(r["first_seen"]),
            first_cycle=int(r["first_cycle"]),
            visits=int(r["visits"]),
            n=int(r["n"]),
            X=int(r["X"]),
            sad=float(r["sad"]),
            aad_sum=float(r["aad_sum"]),
            gad=float(r["gad"]),
            last_visit_cycle=int(r["last_visit_cycle"]),
            last_visit_time=float(r["last_visit_time"]),
            last_change_cycle=int(r["last_change_cycle"]),
            last_change_time=float(r["last_change_time"]),
            D=float(r["D"]),
            A=float(r["A"]),
            R=float(r["R"]),
            M=float(r["M"]),
            status=int(r["status"]),
            gone=bool(r["gone"]),
            etag=_validator(etag),
            last_modified=_validator(lastmod),
            has_body=bool(r["has_body"]),
            failures=int(r["failures"]),
            last_failure_cycle=int(r["last_failure_cycle"]),
            signature=sig,
        )

    def body(self, fingerprint: bytes) -> StoredBody | None:
        raw = self._get_raw(fingerprint, False, True)
        if not raw or raw[6] is None:
            return None
        blob = raw[6]
        try:
            status, hlen = struct.unpack_from("<HI", blob)
            headers = json.loads(blob[6 : 6 + hlen])
            body = zlib.decompress(blob[6 + hlen :])
            if not isinstance(headers, dict):
                raise ValueError("headers are not a map")
        except (struct.error, ValueError, zlib.error) as exc:
            self.unreadable_values += 1
            logger.warning(
                "recrawl: %s field %d in the history store at %s is not a stored body, skipped: %s",
                self._k("body"),
                int(raw[0]),
                self.location,
                exc,
            )
            return None
        return StoredBody(status=status, headers=headers, body=body)

    def _hmget(self, name: str, ids: list[int]) -> list[Any]:
        out: list[Any] = []
        for start in range(0, len(ids), 10_000):
            chunk = ids[start : start + 10_000]
            if chunk:
                out.extend(self._call("read", lambda c, chunk=chunk: c.hmget(self._k(name), chunk)))
        return out

    def requests(self, ids: Iterable[int] | np.ndarray) -> list[dict[str, Any] | None]:
        wanted = [int(i) for i in ids]
        blobs = self._hmget("req", wanted)
        return [
            self._decode(b, f"{self._k('req')} field {i}") if b is not None else None
            for i, b in zip(wanted, blobs, strict=True)
        ]

    def _decode(self, blob: bytes, what: str) -> dict[str, Any] | None:
        d = decode_stored(blob, f"{what} in the history store at {self.location}")
        if d is None:
            self.unreadable_values += 1
        return d

    def urls(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        wanted = [int(i) for i in ids]
        found = self._hmget("urls", wanted)
        missing = [i for i, u in zip(wanted, found, strict=True) if u is None]
        if missing:
            raise HistoryStoreError(f"history store {self.location}: no URL ids {missing[:5]}")
        return [u.decode("utf-8", "surrogateescape") for u in found]

    def rows(self) -> tuple[np.ndarray, int]:
        """Every URL's row (structured :data:`ROW_DTYPE`, row i = id i + 1) and the cycle.

        Two round trips: the id counter and the cycle, then every shard in
        ``READ_CHUNK`` slices in one pipeline.
        """

        def read(c: Any) -> tuple[np.ndarray, int]:
            pipe = c.pipeline(transaction=False)
            pipe.get(self._k("next_id"))
            pipe.get(self._k("cycle"))
            next_id, cycle = pipe.execute()
            total = self._int(next_id, "next_id")
            size = ROW_DTYPE.itemsize
            pipe = c.pipeline(transaction=False)
            plan = []
            for shard in range(0, (total + self._rps - 1) // self._rps):
                rows_here = min(self._rps, total - shard * self._rps)
                end = rows_here * size
                for start in range(0, end, READ_CHUNK):
                    pipe.getrange(self._k(f"rows:{shard}"), start, min(start + READ_CHUNK, end) - 1)
                    plan.append(shard)
            parts = pipe.execute() if plan else []
            buf = bytearray(total * size)
            pos = 0
            for part in parts:
                buf[pos : pos + len(part)] = part
                pos += len(part)
            return np.frombuffer(bytes(buf), dtype=ROW_DTYPE), self._int(cycle, "cycle")

        return self._call("read", read)

    def arrays(self) -> HistoryArrays:
        table, cycle = self.rows()
        keep = np.flatnonzero(table["present"] == 1)
        table = table[keep]
        columns = {
            "n": table["n"].astype(np.int64),
            "X": table["X"].astype(np.int64),
            "sad": np.ascontiguousarray(table["sad"]),
            "aad_sum": np.ascontiguousarray(table["aad_sum"]),
            "gad": np.ascontiguousarray(table["gad"]),
            "last_visit_cycle": table["last_visit_cycle"].astype(np.int64),
            "last_visit_time": np.ascontiguousarray(table["last_visit_time"]),
            "D": np.ascontiguousarray(table["D"]),
            "A": np.ascontiguousarray(table["A"]),
            "R": np.ascontiguousarray(table["R"]),
            "M": np.ascontiguousarray(table["M"]),
            "gone": table["gone"].astype(bool),
            "failures": table["failures"].astype(np.int64),
            "last_failure_cycle": table["last_failure_cycle"].astype(np.int64),
        }
        return HistoryArrays(ids=keep.astype(np.int64) + 1, columns=columns, cycle=cycle)

    def visit_log(
        self, url_ids: Iterable[int] | None = None, *, since_cycle: int | None = None
    ) -> dict[str, np.ndarray]:
        """The visit log (oldest first) as numpy columns; ``changed`` is -1 for no observation.

        ``since_cycle``: only the cycles from that one on (read from the first log
        entry of those cycles, ``{p}:logstart``, not from the start of the log).
        """

        def first_entry(c: Any) -> str | None:
            cur = int(c.get(self._k("cycle")) or 0)
            cycles = list(range(max(0, since_cycle or 0), cur + 1))
            starts = [s for s in c.hmget(self._k("logstart"), cycles) if s] if cycles else []
            if not starts:
                return None
            return min(starts, key=lambda s: tuple(int(x) for x in s.split(b"-"))).decode()

        def read(c: Any) -> bytes:
            parts: list[bytes] = []
            start = "-"
            if since_cycle is not None:
                first = first_entry(c)
                if first is None:
                    return b""
                start = first
            while True:
                batch = c.xrange(self._k("log"), min=start, max="+", count=50_000)
                if not batch:
                    break
                parts.extend(fields[b"v"] for _, fields in batch)
                last = batch[-1][0].decode()
                ms, seq = last.split("-")
                start = f"{ms}-{int(seq) + 1}"
                if len(batch) < 50_000:
                    break
            return b"".join(parts)

        table = np.frombuffer(self._call("read", read), dtype=LOG_DTYPE)
        if since_cycle is not None:
            table = table[table["cycle"] >= since_cycle]
        if url_ids is not None:
            table = table[np.isin(table["url_id"], np.fromiter(url_ids, dtype=np.int64))]
        return {
            name: table[name].astype(np.float64 if name == "time" else np.int64)
            for name in LOG_DTYPE.names or ()
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
        version, owner = self._call(
            "read", lambda c: c.hmget(f"{prefix}:meta", ["schema_version", "spider"])
        )
        return version is not None and owner is None

    # -- the frontier --------------------------------------------------------

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        args: list[Any] = []
        for fp, request, priority in items:
            blob = encode_stored(request)
            if blob is not None:  # not plain data: cannot be kept
                args.extend((fp, int(priority), blob))
        script = self._script("push_frontier")
        added = 0
        for start in range(0, len(args), 3 * 1000):
            chunk = args[start : start + 3 * 1000]
            added += int(
                self._call(
                    "write to", lambda c, chunk=chunk: script(args=[self.key, *chunk], client=c)
                )
            )
        return added

    def pop_frontier(self, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        script = self._script("pop_frontier")
        blobs = self._call("write to", lambda c: script(args=[self.key, int(limit)], client=c))
        what = f"an entry of {self._k('frontier:req')}"
        out = [self._decode(b, what) for b in blobs if b is not None]
        return [d for d in out if d is not None]

    def frontier_size(self) -> int:
        return int(self._call("read", lambda c: c.zcard(self._k("frontier"))))

    # -- writes ------------------------------------------------------------

    def record(self, visit: Visit) -> UrlRecord:
        script = self._script("record")
        request = None
        if visit.request is not None:
            request = encode_stored(visit.request)  # None: keep the previously stored one
        body = None
        good = good_status(visit.status)
        if self.store_bodies and visit.body is not None and good:
            headers = json.dumps(visit.headers or {}).encode()
            body = (
                struct.pack("<HI", visit.status, len(headers))
                + headers
                + zlib.compress(visit.body, 1)
            )
        args = [
            self.key,
            visit.fingerprint,
            visit.url,
            repr(float(visit.time)),
            int(visit.status),
            -1 if visit.changed is None else int(bool(visit.changed)),
            int(visit.distance),
            int(visit.added),
            int(visit.removed),
            int(visit.modified),
            int(visit.attributes),
            int(visit.size),
            _opt(visit.etag),
            _opt(visit.last_modified),
            int(bool(visit.gone)),
            "" if visit.cycle is None else int(visit.cycle),
            _opt(visit.signature),
            _opt(request),
            _opt(body),
            self.log_maxlen,
            self._rps,
            ROW_FORMAT,
            LOG_FORMAT,
        ]
        uid, row, etag, lastmod, stored_sig = self._call(
            "write to", lambda c: script(args=args, client=c)
        )
        sig = visit.signature if visit.signature is not None else stored_sig
        return self._record_from(int(uid), visit.fingerprint, row, visit.url, etag, lastmod, sig)

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
        for k in sorted(items, key=int):
            yield int(k), bytes(items[k])

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
        count, bits = cw >> 5, cw & 31
        out = np.full((len(idx), window), np.nan)
        for i in range(window):
            out[:, i] = np.where(count > i, (bits >> i) & 1, np.nan)
        return out

    # -- maintenance -----------------------------------------------------------

    def clear(self) -> None:
        """Delete this store's keys (``scrapy recrawl-reset``), leaving an empty store at
        cycle 0. Only the names this store writes under its prefix: a longer prefix that
        starts with it (another spider's ``recrawl:<name>``) is left alone."""

        token, created = new_epoch()

        def delete(c: Any) -> None:
            delete_own_keys(c, self.key)
            # a new epoch: a crawl still writing into the old history notices (epoch.py)
            meta = {
                "schema_version": SCHEMA_VERSION,
                "rows_per_shard": self._rps,
                "epoch": token,
                "epoch_created": repr(created),
            }
            c.hset(self._k("meta"), mapping=meta)

        self._call("write to", delete)
        self.epoch, self.epoch_created, self._last_cycle = token, created, 0


class _Guarded:
    """A registered write script called with the store's epoch and meta key appended
    (redis_schema.guarded); a refusal is the store's loss (``RedisHistoryStore._lost``),
    and under "continue" the write is made once more, into the fresh history."""

    def __init__(self, store: RedisHistoryStore, script: Any) -> None:
        self.store = store
        self.script = script

    def __call__(
        self, keys: Sequence[Any] = (), args: Sequence[Any] = (), client: Any = None
    ) -> Any:
        import redis

        for _ in range(2):
            extra = [self.store.epoch or "", self.store._k("meta")]
            try:
                return self.script(keys=list(keys), args=[*args, *extra], client=client)
            except redis.ResponseError as exc:
                message = str(exc)
                if not message.startswith(LOST_ERROR):
                    raise
                self.store._lost(message[len(LOST_ERROR) :].strip() or None)
        raise StoreLost(self.store.location, self.store.key, self.store.epoch, None, None)
