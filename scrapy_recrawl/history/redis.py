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

Encoding (keys under ``RECRAWL_REDIS_KEY``, default ``recrawl``):

``{p}:rows:{shard}``
    The per-URL numbers as fixed-width little-endian rows of
    :data:`ROW_DTYPE` (112 bytes), row ``id - 1`` of a string of
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
    hashes id -> URL, validators, change signature, pickled request dict,
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
    discovered requests waiting for a cycle with budget.
``{p}:meta``  schema version, rows per shard.
"""

from __future__ import annotations

import json
import pickle
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from .base import (
    SCHEMA_VERSION,
    HistoryArrays,
    HistoryStoreError,
    StoredBody,
    UrlRecord,
    Visit,
)
from .records import check_table, unpack_list

#: One URL's numbers, as the Lua script packs them (struct format ``ROW_FORMAT``).
ROW_DTYPE = np.dtype(
    [
        ("n", "<i4"),
        ("X", "<i4"),
        ("visits", "<i4"),
        ("status", "<i4"),
        ("last_visit_cycle", "<i4"),
        ("last_change_cycle", "<i4"),
        ("first_cycle", "<i4"),
        ("gone", "u1"),
        ("has_body", "u1"),
        ("present", "u1"),
        ("cwin", "u1"),  # the last <= 5 change observations (content window, C1..C5)
        ("sad", "<f8"),
        ("aad_sum", "<f8"),
        ("gad", "<f8"),
        ("last_visit_time", "<f8"),
        ("last_change_time", "<f8"),
        ("first_seen", "<f8"),
        ("D", "<f8"),
        ("A", "<f8"),
        ("R", "<f8"),
        ("M", "<f8"),
    ]
)
ROW_FORMAT = "<i4i4i4i4i4i4i4BBBBdddddddddd"
assert ROW_DTYPE.itemsize == struct.calcsize("<iiiiiiiBBBBdddddddddd") == 112

#: One visit-log entry (the columns of SqliteHistoryStore.visit_log()).
LOG_DTYPE = np.dtype(
    [
        ("url_id", "<i8"),
        ("time", "<f8"),
        ("cycle", "<i4"),
        ("status", "<i4"),
        ("changed", "<i4"),
        ("distance", "<i4"),
        ("added", "<i4"),
        ("removed", "<i4"),
        ("modified", "<i4"),
        ("attributes", "<i4"),
        ("bytes", "<i8"),
    ]
)
LOG_FORMAT = "<i8di4i4i4i4i4i4i4i4i8"

#: Rows per ``{p}:rows:{shard}`` string: 2**20 * 112 bytes = 112 MiB, under Redis's 512 MiB.
ROWS_PER_SHARD = 1 << 20
#: Bytes per GETRANGE when loading the rows (a few per million URLs).
READ_CHUNK = 16 << 20

# Optional string arguments: "" is None, "=" + value is a value (Lua has no None).
_NONE = b""


def _opt(value: str | bytes | None) -> bytes:
    if value is None:
        return _NONE
    return b"=" + (value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value)


RECORD_LUA = r"""
-- Fold one visit into a URL's state and append it to the visit log, atomically.
-- Mirrors SqliteHistoryStore.record() and state.observe() exactly.
local P = ARGV[1]
local fp = ARGV[2]
local url = ARGV[3]
local t = tonumber(ARGV[4])
local status = tonumber(ARGV[5])
local changed = tonumber(ARGV[6])          -- -1: not an observation
local distance = tonumber(ARGV[7])
local added = tonumber(ARGV[8])
local removed = tonumber(ARGV[9])
local modified = tonumber(ARGV[10])
local attributes = tonumber(ARGV[11])
local size = tonumber(ARGV[12])
local etag = ARGV[13]                      -- '' None, '=value'
local lastmod = ARGV[14]
local vgone = ARGV[15] == '1'
local vcycle = ARGV[16]                    -- '' the store's current cycle
local sig = ARGV[17]
local req = ARGV[18]
local body = ARGV[19]
local logcap = tonumber(ARGV[20])
local rps = tonumber(ARGV[21])
local FMT = ARGV[22]
local LOGFMT = ARGV[23]
local ROWSIZE = 112

local cur = tonumber(redis.call('GET', P .. ':cycle') or '0')
local cycle = cur
if vcycle ~= '' then cycle = tonumber(vcycle) end
local nan = 0 / 0

local n, X, visits, st, lvc, lcc, fc, gone, hb, present, cw
local sad, aad, gad, lvt, lct, fs, D, A, R, M
local id = redis.call('HGET', P .. ':ids', fp)
local shard, off
if id then
  id = tonumber(id)
  shard = math.floor((id - 1) / rps)
  off = ((id - 1) % rps) * ROWSIZE
  local row = redis.call('GETRANGE', P .. ':rows:' .. shard, off, off + ROWSIZE - 1)
  n, X, visits, st, lvc, lcc, fc, gone, hb, present, cw,
    sad, aad, gad, lvt, lct, fs, D, A, R, M = struct.unpack(FMT, row)
else
  id = redis.call('INCR', P .. ':next_id')
  redis.call('HSET', P .. ':ids', fp, id)
  shard = math.floor((id - 1) / rps)
  off = ((id - 1) % rps) * ROWSIZE
  n, X, visits, st, lvc, lcc, fc, gone, hb, present, cw = 0, 0, 0, 0, -1, -1, cur, 0, 0, 1, 0
  sad, aad, gad, lvt, lct, fs, D, A, R, M = 0, 0, 0, nan, nan, t, nan, nan, nan, nan
end

visits = visits + 1
st = status
local good = (status >= 200 and status < 300) or status == 304
local observed = changed >= 0 and good and lvc >= 0
if observed then
  -- state.observe: gad_n = w I + (1 - w) gad_(n-1), w = 1 / (2 - 2^(1-n))
  local ind = changed
  local n1 = n + 1
  local w = 1.0 / (2.0 - 2.0 ^ (1.0 - n1))
  gad = w * ind + (1.0 - w) * gad
  if ind > 0 then X = X + 1 end
  sad = ind
  aad = aad + n1 * ind
  n = n1
  D, A, R, M = distance, added, removed, modified
  -- the change window: count (<= 5) in the top 3 bits, indicators newest in bit 0
  local count = math.min(math.floor(cw / 32) + 1, 5)
  local bits = (cw % 16) * 2
  if ind > 0 then bits = bits + 1 end
  cw = count * 32 + bits
  if ind > 0 then
    lcc = cycle
    lct = t
  end
end
local E = P .. ':etag'
local L = P .. ':lastmod'
if good then
  lvc = cycle
  lvt = t
  gone = 0
  if status == 304 then
    -- a 304 may repeat only some validators: keep the ones it leaves out
    if string.len(etag) > 1 then redis.call('HSET', E, id, string.sub(etag, 2)) end
    if string.len(lastmod) > 1 then redis.call('HSET', L, id, string.sub(lastmod, 2)) end
  else
    if etag == '' then redis.call('HDEL', E, id) else redis.call('HSET', E, id, string.sub(etag, 2)) end
    if lastmod == '' then redis.call('HDEL', L, id) else redis.call('HSET', L, id, string.sub(lastmod, 2)) end
  end
elseif vgone then
  gone = 1
end
local stored_sig = false
if sig ~= '' then
  redis.call('HSET', P .. ':sig', id, string.sub(sig, 2))
else
  stored_sig = redis.call('HGET', P .. ':sig', id)
end
if req ~= '' then redis.call('HSET', P .. ':req', id, string.sub(req, 2)) end
if body ~= '' and good then
  redis.call('HSET', P .. ':body', id, string.sub(body, 2))
  hb = 1
end
redis.call('HSET', P .. ':urls', id, url)

local newrow = struct.pack(FMT, n, X, visits, st, lvc, lcc, fc, gone, hb, present, cw,
  sad, aad, gad, lvt, lct, fs, D, A, R, M)
redis.call('SETRANGE', P .. ':rows:' .. shard, off, newrow)

local obs = -1
if observed then obs = changed end
local entry = struct.pack(LOGFMT, id, t, cycle, status, obs, distance, added, removed,
  modified, attributes, size)
local entry_id
if logcap > 0 then
  entry_id = redis.call('XADD', P .. ':log', 'MAXLEN', '~', logcap, '*', 'v', entry)
else
  entry_id = redis.call('XADD', P .. ':log', '*', 'v', entry)
end
redis.call('HSETNX', P .. ':logstart', cycle, entry_id)
return {id, newrow, redis.call('HGET', E, id), redis.call('HGET', L, id), stored_sig}
"""

GET_LUA = r"""
-- A URL's record in one round trip: id, row, url, validators, [signature], [body].
local P = ARGV[1]
local id = redis.call('HGET', P .. ':ids', ARGV[2])
if not id then return false end
local rps = tonumber(ARGV[5])
local n = tonumber(id)
local off = ((n - 1) % rps) * 112
local row = redis.call('GETRANGE', P .. ':rows:' .. math.floor((n - 1) / rps), off, off + 111)
local sig = false
if ARGV[3] == '1' then sig = redis.call('HGET', P .. ':sig', id) end
local body = false
if ARGV[4] == '1' then body = redis.call('HGET', P .. ':body', id) end
return {n, row, redis.call('HGET', P .. ':urls', id), redis.call('HGET', P .. ':etag', id),
  redis.call('HGET', P .. ':lastmod', id), sig, body}
"""

PUSH_FRONTIER_LUA = r"""
-- ARGV: prefix, then (fingerprint, priority, request blob) triples. Keeps the first
-- copy of a fingerprint (INSERT OR IGNORE); order: priority desc, then oldest first.
local P = ARGV[1]
local added = 0
for i = 2, #ARGV, 3 do
  local fp = ARGV[i]
  if redis.call('HEXISTS', P .. ':frontier:fp', fp) == 0 then
    local seq = redis.call('INCR', P .. ':frontier:seq')
    local member = struct.pack('>i8', seq) .. fp
    redis.call('HSET', P .. ':frontier:fp', fp, member)
    redis.call('HSET', P .. ':frontier:req', member, ARGV[i + 2])
    redis.call('ZADD', P .. ':frontier', -tonumber(ARGV[i + 1]), member)
    added = added + 1
  end
end
return added
"""

POP_FRONTIER_LUA = r"""
local P = ARGV[1]
local popped = redis.call('ZPOPMIN', P .. ':frontier', tonumber(ARGV[2]))
local out = {}
for i = 1, #popped, 2 do
  local member = popped[i]
  out[#out + 1] = redis.call('HGET', P .. ':frontier:req', member)
  redis.call('HDEL', P .. ':frontier:req', member)
  redis.call('HDEL', P .. ':frontier:fp', string.sub(member, 9))
end
return out
"""


SIDE_PUSH_LUA = r"""
-- Prepend one item (u32 length + bytes) to a side-storage list, keep the newest
-- ARGV[3]; returns the list as it was. KEYS[1] the table's hash; ARGV key, item, keep.
local old = redis.call('HGET', KEYS[1], ARGV[1])
local keep = tonumber(ARGV[3])
local out = struct.pack('<I4', string.len(ARGV[2])) .. ARGV[2]
if old and keep > 1 then
  local pos, kept = 1, 1
  while pos <= string.len(old) and kept < keep do
    local len = struct.unpack('<I4', string.sub(old, pos, pos + 3))
    out = out .. string.sub(old, pos, pos + 3 + len)
    pos = pos + 4 + len
    kept = kept + 1
  end
end
redis.call('HSET', KEYS[1], ARGV[1], out)
return old or ''
"""

MIGRATE_1_TO_2_LUA = r"""
-- Version 2: paper 004's {p}:bags / {p}:dists hashes become side-storage tables.
-- KEYS meta, bags, dists, side bags, side dists. Atomic: all of it or none.
if tonumber(redis.call('HGET', KEYS[1], 'schema_version')) ~= 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('RENAME', KEYS[2], KEYS[4]) end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('RENAME', KEYS[3], KEYS[5]) end
redis.call('HSET', KEYS[1], 'schema_version', 2)
return 1
"""


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.RedisError, OSError)


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def _settings_dict(settings: Any, name: str) -> dict[str, Any]:
    if settings is None:
        return {}
    getdict = getattr(settings, "getdict", None)
    if getdict is not None:
        return dict(getdict(name))
    value = settings.get(name) or {}
    return dict(json.loads(value) if isinstance(value, str) else value)


def redis_from_settings(settings: Any, url: str | None = None) -> tuple[Any, str]:
    """A redis-py client as scrapy-redis builds it (``REDIS_URL``, ``REDIS_HOST``,
    ``REDIS_PORT``, ``REDIS_DB``, ``REDIS_PARAMS``), or for ``url`` with
    ``REDIS_PARAMS``; and its location for messages (password left out)."""
    from scrapy_redis import connection, defaults

    params: dict[str, Any] = defaults.REDIS_PARAMS.copy()
    params.update(_settings_dict(settings, "REDIS_PARAMS"))
    if url is None:
        for source, dest in connection.SETTINGS_PARAMS_MAP.items():
            value = settings.get(source) if settings is not None else None
            if value:
                params[dest] = value
    else:
        params["url"] = url
    # the store keeps binary data: never let the client decode it
    params["decode_responses"] = False
    if isinstance(params.get("redis_cls"), str):
        from scrapy.utils.misc import load_object

        params["redis_cls"] = load_object(params["redis_cls"])
    client = connection.get_redis(**params)
    return client, client_location(client)


def client_location(client: Any) -> str:
    kw = client.connection_pool.connection_kwargs
    if "path" in kw:
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    scheme = "rediss" if kw.get("ssl") else "redis"
    return f"{scheme}://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


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
        self._scripts = {
            "record": client.register_script(RECORD_LUA),
            "get": client.register_script(GET_LUA),
            "push_frontier": client.register_script(PUSH_FRONTIER_LUA),
            "pop_frontier": client.register_script(POP_FRONTIER_LUA),
            "side_push": client.register_script(SIDE_PUSH_LUA),
        }

    def _migrate(self, version: int) -> None:
        """Bring a store of an older schema up to this release's, in one script per step."""
        if version == 1:
            keys = [self._k(n) for n in ("meta", "bags", "dists")]
            keys += [self._side("content_bags"), self._side("content_dists")]
            self._call("migrate", lambda c: c.eval(MIGRATE_1_TO_2_LUA, len(keys), *keys))

    def close(self) -> None:
        if self._client is None:
            return
        client, self._client = self._client, None
        self._scripts = {}
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
        return int(self._call("read", lambda c: c.get(self._k("cycle"))) or 0)

    def advance_cycle(self) -> int:
        return int(self._call("write to", lambda c: c.incr(self._k("cycle"))))

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
            etag=etag.decode("utf-8", "surrogateescape") if etag is not None else None,
            last_modified=lastmod.decode("utf-8", "surrogateescape")
            if lastmod is not None
            else None,
            has_body=bool(r["has_body"]),
            signature=sig,
        )

    def body(self, fingerprint: bytes) -> StoredBody | None:
        raw = self._get_raw(fingerprint, False, True)
        if not raw or raw[6] is None:
            return None
        blob = raw[6]
        status, hlen = struct.unpack_from("<HI", blob)
        headers = json.loads(blob[6 : 6 + hlen])
        return StoredBody(status=status, headers=headers, body=zlib.decompress(blob[6 + hlen :]))

    def _hmget(self, name: str, ids: list[int]) -> list[Any]:
        out: list[Any] = []
        for start in range(0, len(ids), 10_000):
            chunk = ids[start : start + 10_000]
            if chunk:
                out.extend(self._call("read", lambda c, chunk=chunk: c.hmget(self._k(name), chunk)))
        return out

    def requests(self, ids: Iterable[int] | np.ndarray) -> list[dict[str, Any] | None]:
        blobs = self._hmget("req", [int(i) for i in ids])
        return [pickle.loads(b) if b is not None else None for b in blobs]

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
            total = int(next_id or 0)
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
            return np.frombuffer(bytes(buf), dtype=ROW_DTYPE), int(cycle or 0)

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
            parts = []
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

    # -- the frontier --------------------------------------------------------

    def push_frontier(self, items: list[tuple[bytes, dict[str, Any], int]]) -> int:
        args: list[Any] = []
        for fp, request, priority in items:
            try:
                args.extend((fp, int(priority), pickle.dumps(request, protocol=4)))
            except Exception:  # noqa: BLE001 -- unpicklable meta: cannot be kept
                continue
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
        return [pickle.loads(b) for b in blobs]

    def frontier_size(self) -> int:
        return int(self._call("read", lambda c: c.zcard(self._k("frontier"))))

    # -- writes ------------------------------------------------------------

    def record(self, visit: Visit) -> UrlRecord:
        script = self._script("record")
        request = None
        if visit.request is not None:
            try:
                request = pickle.dumps(visit.request, protocol=4)
            except Exception:  # noqa: BLE001 -- a callback or meta that cannot be pickled
                request = None  # keep the previously stored request; the middleware logs it
        body = None
        good = 200 <= visit.status < 300 or visit.status == 304
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
        key = self._side(table)
        for start in range(0, len(items), 10_000):
            mapping = {int(k): bytes(v) for k, v in items[start : start + 10_000]}
            if mapping:
                self._call("write to", lambda c, m=mapping: c.hset(key, mapping=m))

    def side_delete(self, table: str, keys: Sequence[int]) -> None:
        key, wanted = self._side(table), [int(k) for k in keys]
        if wanted:
            self._call("write to", lambda c: c.hdel(key, *wanted))

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
        """Delete every key of this store (tests, benchmarks)."""

        def delete(c: Any) -> None:
            keys = list(c.scan_iter(match=f"{self.key}:*", count=1000))
            for start in range(0, len(keys), 1000):
                c.delete(*keys[start : start + 1000])

        self._call("write to", delete)


def store_from_spec(spec: str | None, settings: Any, **options: Any) -> RedisHistoryStore:
    """The store ``RECRAWL_STORE`` names: ``redis://…``/``rediss://``/``unix://`` or
    ``"redis"`` / None (scrapy-redis's ``REDIS_URL`` and friends)."""
    from ..settings import get

    key = get(settings, "RECRAWL_REDIS_KEY", str) or "recrawl"
    maxlen = get(
        settings, "RECRAWL_REDIS_LOG_MAXLEN", int, lambda v: v >= 0, "entries >= 0 (0: no cap)"
    )
    url = None if spec in (None, "redis") else spec
    return RedisHistoryStore(
        url,
        settings=settings,
        key=key,
        log_maxlen=10_000_000 if maxlen is None else maxlen,
        **options,
    )
