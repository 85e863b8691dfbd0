"""The Redis store's encoding (schema version 5): key names, the fixed-width row and
log entry, the request blob, and the Lua scripts.

Every script names every key it touches in ``KEYS`` (never built from ``ARGV``), and
all the keys of one script share one hash tag, so each runs on one Redis Cluster slot
(docs/distributed.md, "The history store's encoding"): the store's own keys are tagged
``{<prefix>}``, each shard's ``{<prefix>#<shard>}``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .request_codec import encode_stored

#: One URL's numbers in schema version 5 (87 bytes, packed, little-endian), as the Lua
#: scripts pack them (struct format :data:`ROW_FORMAT`). ``flags``: bit 0 gone, bit 1
#: has_body, bit 2 present (0: an id reserved and never used), bit 3 ``sad`` (the last
#: change indicator). ``req_len``/``req_off``: the URL's blob in ``{p#s}:blobs``
#: (``req_len`` 0: none; :data:`BIG_BLOB`: in ``{p#s}:bigreq``).
ROW_DTYPE = np.dtype(
    [
        ("n", "<i4"),
        ("X", "<i4"),
        ("visits", "<i4"),
        ("last_visit_cycle", "<i4"),
        ("last_change_cycle", "<i4"),
        ("first_cycle", "<i4"),
        ("last_failure_cycle", "<i4"),  # -1: never failed
        ("status", "<u2"),
        ("failures", "u1"),  # consecutive failed cycles, saturating at 255
        ("flags", "u1"),
        ("cwin", "u1"),  # the last <= 5 change observations (content window, C1..C5)
        ("req_len", "<u2"),
        ("req_off", "<u4"),
        ("aad_sum", "<f8"),
        ("gad", "<f8"),
        ("last_visit_time", "<f8"),
        ("last_change_time", "<f8"),
        ("first_seen", "<f8"),
        ("D", "<u2"),  # counts, saturating at 65,534; NO_COUNT (65,535): NaN, none yet
        ("A", "<u2"),
        ("R", "<u2"),
        ("M", "<u2"),
    ]
)
ROW_FORMAT = "<i4i4i4i4i4i4i4I2BBBI2I4dddddI2I2I2I2"
ROW_SIZE = ROW_DTYPE.itemsize
assert ROW_SIZE == struct.calcsize("<iiiiiiiHBBBHIdddddHHHH") == 87
#: ``D``/``A``/``R``/``M`` of a URL with no change observation yet (NaN)
NO_COUNT = 0xFFFF

GONE, HAS_BODY, PRESENT, SAD = 1, 2, 4, 8
#: ``req_len`` of a blob of 65,535 bytes or more, kept in the shard's ``bigreq`` hash
BIG_BLOB = 0xFFFF

#: The row of schema version 4 (120 bytes): read once, by the migration to 5.
ROW_DTYPE_V4 = np.dtype(
    [
        ("n", "<i4"),
        ("X", "<i4"),
        ("visits", "<i4"),
        ("status", "<i4"),
        ("last_visit_cycle", "<i4"),
        ("last_change_cycle", "<i4"),
        ("first_cycle", "<i4"),
        ("failures", "<i4"),
        ("last_failure_cycle", "<i4"),
        ("gone", "u1"),
        ("has_body", "u1"),
        ("present", "u1"),
        ("cwin", "u1"),
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
assert ROW_DTYPE_V4.itemsize == 120
#: Rows per ``<p>:rows:<n>`` string in schema versions 1 to 4.
ROWS_PER_SHARD_V4 = 1 << 20

#: The row of schema versions 1 to 3 (112 bytes): read once, by the migration to 4.
ROW_DTYPE_V3 = np.dtype(
    [f for f in ROW_DTYPE_V4.descr if f[0] not in ("failures", "last_failure_cycle")]
)
assert ROW_DTYPE_V3.itemsize == 112

#: One visit-log entry (the columns of SqliteHistoryStore.visit_log(), then ``order``:
#: the writer's clock in microseconds times 4096 plus the visit's place in its batch,
#: which orders the entries of all shards, oldest first).
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
        ("order", "<i8"),
    ]
)
#: the entry less ``order`` (8 bytes the client packs, appended by the script)
LOG_FORMAT = "<i8di4i4i4i4i4i4i4i4i8"
LOG_DTYPE_V4 = np.dtype([f for f in LOG_DTYPE.descr if f[0] != "order"])

#: Shards of a new store (``RECRAWL_REDIS_SHARDS``); a store keeps the count it was
#: created with (``{p}:meta`` field ``shards``).
DEFAULT_SHARDS = 16
#: Hashes of the URL index per shard (``{p#s}:ix:<b>``): 16 shards x 16,384 buckets
#: hold ~128 fields each (Redis's hash-max-ziplist-entries) at ~33M URLs.
BUCKETS = 1 << 14
#: Bytes of the fingerprint's hash kept as the index field.
FIELD_BYTES = 8

#: The crawl lease, ``{<p>}:lease``: a hash, holder id (``host:pid:token``) -> a JSON
#: status stamped with the Redis's clock (history/redis_liveness.py), one field per crawl
#: that has the store open, refreshed at each epoch check, deleted at its clean close,
#: and expiring ``RECRAWL_REDIS_WORKER_TIMEOUT`` after its last stamp (a killed crawl's
#: lease dies). ``scrapy recrawl-reset`` refuses while it names a live holder. Liveness,
#: not history: it came with no schema version, and a store of any version may lack it.
LEASE = "lease"

#: Bytes per GETRANGE when loading rows or blobs.
READ_CHUNK = 16 << 20

#: URL ids reserved at once per process and shard (``INCRBY {p#s}:next``).
ID_BLOCK = 256


class Layout:
    """The key names of one store: ``{<prefix>}:<name>`` for the store's own keys (one
    slot), ``{<prefix>#<shard>}:<name>`` for a shard's (one slot per shard)."""

    def __init__(self, prefix: str, shards: int) -> None:
        self.prefix = prefix
        self.shards = int(shards)

    def store(self, name: str) -> str:
        return f"{{{self.prefix}}}:{name}"

    def shard(self, shard: int, name: str) -> str:
        return f"{{{self.prefix}#{shard}}}:{name}"

    def bucket(self, shard: int, bucket: int) -> str:
        return self.shard(shard, f"ix:{bucket}")

    def shard_keys(self, shard: int) -> list[str]:
        """The keys the record script writes, in its KEYS order (the buckets follow)."""
        names = ("rows", "blobs", "bigreq", "etag", "lastmod", "sig", "body", "log", "logstart")
        return [self.shard(shard, n) for n in names]

    def locate(self, fingerprint: bytes) -> tuple[int, int, bytes]:
        """``(shard, bucket, field)`` of a fingerprint in the URL index."""
        h = hashlib.blake2b(fingerprint, digest_size=4 + FIELD_BYTES).digest()
        x = int.from_bytes(h[:4], "little")
        return x % self.shards, (x // self.shards) % BUCKETS, h[4:]

    def id_of(self, shard: int, local: int) -> int:
        """The URL id of the ``local``-th row (from 0) of ``shard``."""
        return local * self.shards + shard + 1

    def place(self, uid: int) -> tuple[int, int]:
        """``(shard, local row)`` of a URL id."""
        return (uid - 1) % self.shards, (uid - 1) // self.shards

    def glob(self) -> list[str]:
        """SCAN patterns matching every key of the store (and only its)."""
        p = "".join("\\" + c if c in "*?[]\\" else c for c in self.prefix)
        return [f"{{{p}}}:*", f"{{{p}#*"]


# -- the blob of a URL: the URL and its request, what repeats kept once ------------------
#
# byte 0 the kind: 0 no request stored, 1 a request shape of the store's dictionary (u16
# id follows), 2 the shape inline (u32 length, then it); then the URL part: byte 0, then
# the URL's UTF-8 bytes; or byte 1, a u16 id of its scheme and host (``https://host``)
# in the store's host dictionary, then the rest of the URL. A shape is the request dict
# with "url" emptied (unless the request is of another URL), as data (request_codec):
# the callback, method, headers, meta... that repeat across URLs.
BLOB_URL, BLOB_SHAPE, BLOB_INLINE = 0, 1, 2
#: shapes longer than this are kept inline (the dictionary is for what repeats)
MAX_SHAPE = 1024


def shape_of(request: dict[str, Any], url: str) -> bytes | None:
    """The request's shape as data (None: not data): its dict with ``url`` emptied when
    it is the URL's (a request that was redirected from elsewhere keeps its own)."""
    if request.get("url") == url:
        return encode_stored({**request, "url": ""})
    return encode_stored(request)


def host_of(url: str) -> tuple[str, str]:
    """``(scheme and host, the rest)`` of a URL (the whole URL and "" if it has no path)."""
    start = url.find("://")
    if start < 0:
        return "", url
    end = url.find("/", start + 3)
    return (url, "") if end < 0 else (url[:end], url[end:])


def url_part(url: str, host_id: int) -> bytes:
    """The URL part of a blob: with the id of its host (``host_id`` > 0) or whole."""
    if host_id > 0:
        rest = host_of(url)[1]
        return struct.pack("<BH", 1, host_id) + rest.encode("utf-8", "surrogateescape")
    return b"\0" + url.encode("utf-8", "surrogateescape")


def blob(part: bytes, shape_id: int, shape: bytes | None) -> bytes:
    """A URL's blob: its URL part alone (``shape`` None), or with a shape by id or inline."""
    if shape is None:
        return bytes([BLOB_URL]) + part
    if shape_id > 0:
        return struct.pack("<BH", BLOB_SHAPE, shape_id) + part
    return struct.pack("<BI", BLOB_INLINE, len(shape)) + shape + part


def split_blob(data: bytes) -> tuple[bytes, int, bytes | None]:
    """``(URL part, shape id, inline shape)`` of a blob (0 and None: no request)."""
    kind = data[0]
    if kind == BLOB_SHAPE:
        (sid,) = struct.unpack_from("<H", data, 1)
        return data[3:], sid, None
    if kind == BLOB_INLINE:
        (n,) = struct.unpack_from("<I", data, 1)
        return data[5 + n :], 0, bytes(data[5 : 5 + n])
    if kind == BLOB_URL:
        return data[1:], 0, None
    raise ValueError(f"blob kind {kind}")


def url_from(part: bytes, hosts: Callable[[int], str | None]) -> str:
    """The URL of a blob's URL part (``hosts``: a host id's scheme and host)."""
    if part[0] == 1:
        (hid,) = struct.unpack_from("<H", part, 1)
        host = hosts(hid)
        if host is None:
            raise ValueError(f"no host {hid}")
        return host + part[3:].decode("utf-8", "surrogateescape")
    if part[0] == 0:
        return part[1:].decode("utf-8", "surrogateescape")
    raise ValueError(f"URL part kind {part[0]}")


# Optional string arguments: "" is None, "=" + value is a value (Lua has no None).
_NONE = b""


def _opt(value: str | bytes | None) -> bytes:
    if value is None:
        return _NONE
    return b"=" + (value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value)


#: One visit, as RECORD_LUA reads it (one argument: Lua struct format, then Python's):
#: the index bucket (a KEYS position), the id reserved for it if new, time, status,
#: changed (-1: no observation), distance, added, removed, modified, attributes, size,
#: gone, cycle (-1: the current one), the log order (8 bytes), then the lengths of the
#: strings that follow (-1: None): index field, ETag, Last-Modified, signature, the
#: blob's mode (0 none, 1 set, 2 the URL part only) and length, the body.
VISIT_FORMAT_LUA = "<I2i4di4i4i4i4i4i4i4i8i4i4c8i4i4i4i4i4i4i4"
VISIT_HEAD = struct.Struct("<H")
VISIT_FORMAT = struct.Struct("<idiiiiiiiqii")
VISIT_TAIL = struct.Struct("<iiiiiii")

#: The one reading of a URL's stored blob (RECORD_LUA and GET_LUA start with it): in the
#: shard's ``bigreq`` hash when its length is BIG_BLOB, else ``rlen`` bytes of the
#: shard's ``blobs`` string at ``roff`` (false: none).
_STORED_BLOB_LUA = r"""
local function stored_blob(blobs, bigreq, id, rlen, roff)
  if rlen == __BIG__ then return redis.call('HGET', bigreq, id) end
  if rlen > 0 then return redis.call('GETRANGE', blobs, roff, roff + rlen - 1) end
  return false
end
""".replace("__BIG__", str(BIG_BLOB))

RECORD_LUA = (
    _STORED_BLOB_LUA
    + r"""
-- Fold a batch of visits of one shard into their URLs' rows and append them to the
-- shard's visit log; each visit as SqliteHistoryStore.record() and state.observe()
-- do it. KEYS: rows, blobs, bigreq, etag, lastmod, sig, body, log, logstart, then the
-- index buckets the visits name. ARGV: row format, log format, log cap, shards, the
-- current cycle, then one argument per visit (VISIT_FORMAT, then its strings). Returns
-- the visits' ids (i4 each) and their new rows, as two strings.
local FMT, LOGFMT = ARGV[1], ARGV[2]
local VFMT = '__VFMT__'
local logcap = tonumber(ARGV[3])
local S = tonumber(ARGV[4])
local cur = tonumber(ARGV[5])
local ROWSIZE = __ROWSIZE__
local nan = 0 / 0
local ids, rows = {}, {}
local fresh = 0
for b = 6, #ARGV do
  local v = ARGV[b]
  local bi, pid, t, status, changed, distance, added, removed, modified, attributes, size,
    gone_i, vcycle, order, lf, le, ll, ls, rm, lr, lb, pos = struct.unpack(VFMT, v)
  local bkey = KEYS[bi]
  local field = string.sub(v, pos, pos + lf - 1)
  pos = pos + lf
  local function take(len, mark)                 -- '' None, mark .. value
    if len < 0 then return '' end
    local s = string.sub(v, pos, pos + len - 1)
    pos = pos + len
    return mark .. s
  end
  local etag = take(le, '=')
  local lastmod = take(ll, '=')
  local sig = take(ls, '=')
  local req = ''                                 -- '=blob' set, '~part' the URL only
  if rm == 1 then req = take(lr, '=') elseif rm == 2 then req = take(lr, '~') end
  local body = take(lb, '=')
  local vgone = gone_i == 1
  local cycle = cur
  if vcycle >= 0 then cycle = vcycle end
  local n, X, visits, lvc, lcc, fc, lfc, st, fails, flags, cw, rlen, roff
  local aad, gad, lvt, lct, fs, D, A, R, M
  local id = redis.call('HGET', bkey, field)
  local off
  if id then
    id = tonumber(id)
    off = math.floor((id - 1) / S) * ROWSIZE
    n, X, visits, lvc, lcc, fc, lfc, st, fails, flags, cw, rlen, roff,
      aad, gad, lvt, lct, fs, D, A, R, M =
      struct.unpack(FMT, redis.call('GETRANGE', KEYS[1], off, off + ROWSIZE - 1))
  else
    id = pid                                     -- an id this writer reserved
    redis.call('HSET', bkey, field, id)
    fresh = fresh + 1
    off = math.floor((id - 1) / S) * ROWSIZE
    n, X, visits, lvc, lcc, fc, lfc, st, fails, flags, cw, rlen, roff =
      0, 0, 0, -1, -1, cur, -1, 0, 0, 4, 0, 0, 0
    aad, gad, lvt, lct, fs, D, A, R, M = 0, 0, nan, nan, t, __NOCOUNT__, __NOCOUNT__,
      __NOCOUNT__, __NOCOUNT__
  end
  local gone = flags % 2
  local hb = math.floor(flags / 2) % 2
  local sad = math.floor(flags / 8) % 2

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
    -- counts saturate below NO_COUNT (a u16 each)
    D = math.max(0, math.min(distance, __NOCOUNT__ - 1))
    A = math.max(0, math.min(added, __NOCOUNT__ - 1))
    R = math.max(0, math.min(removed, __NOCOUNT__ - 1))
    M = math.max(0, math.min(modified, __NOCOUNT__ - 1))
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
  if good then
    lvc = cycle
    lvt = t
    gone = 0
    if status == 304 then
      -- a 304 may repeat only some validators: keep the ones it leaves out
      if string.len(etag) > 1 then redis.call('HSET', KEYS[4], id, string.sub(etag, 2)) end
      if string.len(lastmod) > 1 then redis.call('HSET', KEYS[5], id, string.sub(lastmod, 2)) end
    else
      if etag == '' then redis.call('HDEL', KEYS[4], id) else redis.call('HSET', KEYS[4], id, string.sub(etag, 2)) end
      if lastmod == '' then redis.call('HDEL', KEYS[5], id) else redis.call('HSET', KEYS[5], id, string.sub(lastmod, 2)) end
    end
  elseif vgone then
    gone = 1
  end
  -- state.fold_failure: consecutive failed cycles (status 0), one per cycle
  if status == 0 then
    if not (lfc == cycle and fails > 0) then fails = math.min(fails + 1, 255) end
    lfc = cycle
  else
    fails = 0
  end
  if sig ~= '' then redis.call('HSET', KEYS[6], id, string.sub(sig, 2)) end
  -- the URL and its request: one blob, appended once, kept while it is the same
  if req ~= '' then
    local blob = string.sub(req, 2)
    local old = stored_blob(KEYS[2], KEYS[3], id, rlen, roff)
    if string.sub(req, 1, 1) == '~' then
      -- the URL part alone: the stored request stays (its head: kind, shape)
      if old then
        local kind, head = string.byte(old, 1), 1
        if kind == 1 then head = 3 end
        if kind == 2 then head = 5 + struct.unpack('<I4', string.sub(old, 2, 5)) end
        blob = string.sub(old, 1, head) .. blob
      else
        blob = string.char(0) .. blob
      end
    end
    if old ~= blob then
      if rlen == __BIG__ then redis.call('HDEL', KEYS[3], id) end
      if string.len(blob) >= __BIG__ then
        redis.call('HSET', KEYS[3], id, blob)
        rlen, roff = __BIG__, 0
      else
        roff = redis.call('STRLEN', KEYS[2])
        redis.call('APPEND', KEYS[2], blob)
        rlen = string.len(blob)
      end
    end
  end
  if body ~= '' and good then
    redis.call('HSET', KEYS[7], id, string.sub(body, 2))
    hb = 1
  end
  flags = gone + 2 * hb + 4 + 8 * sad
  local newrow = struct.pack(FMT, n, X, visits, lvc, lcc, fc, lfc, st, fails, flags, cw,
    rlen, roff, aad, gad, lvt, lct, fs, D, A, R, M)
  redis.call('SETRANGE', KEYS[1], off, newrow)

  local obs = -1
  if observed then obs = changed end
  local entry = struct.pack(LOGFMT, id, t, cycle, status, obs, distance, added, removed,
    modified, attributes, size) .. order
  local entry_id
  if logcap > 0 then
    entry_id = redis.call('XADD', KEYS[8], 'MAXLEN', '~', logcap, '*', 'v', entry)
  else
    entry_id = redis.call('XADD', KEYS[8], '*', 'v', entry)
  end
  redis.call('HSETNX', KEYS[9], cycle, entry_id)
  ids[#ids + 1] = struct.pack('<i4', id)
  rows[#rows + 1] = newrow
end
if fresh > 0 then redis.call('HINCRBY', EPOCH_META, 'urls', fresh) end
return {table.concat(ids), table.concat(rows)}
""".replace("__ROWSIZE__", str(ROW_SIZE))
    .replace("__VFMT__", VISIT_FORMAT_LUA)
    .replace("__NOCOUNT__", str(NO_COUNT))
    .replace("__BIG__", str(BIG_BLOB))
)


GET_LUA = (
    (
        _STORED_BLOB_LUA
        + r"""
-- A URL's record in one round trip. KEYS: its index bucket, rows, blobs, bigreq, etag,
-- lastmod, sig, body; ARGV: field, shards, want signature, want body.
-- Returns id, row, blob, etag, lastmod, [signature], [body] (false: unknown URL).
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return false end
local S = tonumber(ARGV[2])
local off = math.floor((tonumber(id) - 1) / S) * __ROWSIZE__
local row = redis.call('GETRANGE', KEYS[2], off, off + __ROWSIZE__ - 1)
local rlen, roff = struct.unpack('<I2I4', string.sub(row, 34, 39))
local blob = stored_blob(KEYS[3], KEYS[4], id, rlen, roff)
local sig = false
if ARGV[3] == '1' then sig = redis.call('HGET', KEYS[7], id) end
local body = false
if ARGV[4] == '1' then body = redis.call('HGET', KEYS[8], id) end
return {tonumber(id), row, blob, redis.call('HGET', KEYS[5], id),
  redis.call('HGET', KEYS[6], id), sig, body}
"""
    )
    .replace("__ROWSIZE__", str(ROW_SIZE))
    .replace("__BIG__", str(BIG_BLOB))
)
assert ROW_DTYPE.fields is not None and ROW_DTYPE.fields["req_len"][1] == 33


#: A dictionary of what repeats (request shapes; schemes and hosts): KEYS the entries
#: (id -> value), their index (value -> id); ARGV values. Returns each value's id,
#: adding the new ones (0: the dictionary is full).
DICT_LUA = r"""
local out = {}
for i = 1, #ARGV do
  local id = redis.call('HGET', KEYS[2], ARGV[i])
  if not id then
    if redis.call('HLEN', KEYS[1]) >= __MAXSHAPES__ then
      id = 0
    else
      id = redis.call('HLEN', KEYS[1]) + 1
      redis.call('HSET', KEYS[1], id, ARGV[i])
      redis.call('HSET', KEYS[2], ARGV[i], id)
    end
  end
  out[i] = tonumber(id)
end
return out
"""
MAX_SHAPES = 65_535
DICT_LUA = DICT_LUA.replace("__MAXSHAPES__", str(MAX_SHAPES))


PUSH_FRONTIER_LUA = r"""
-- KEYS frontier, frontier:fp, frontier:req, frontier:seq; ARGV (fingerprint, priority,
-- request blob) triples. Keeps the first copy of a fingerprint (INSERT OR IGNORE);
-- order: priority desc, then oldest first.
local added = 0
for i = 1, #ARGV, 3 do
  local fp = ARGV[i]
  if redis.call('HEXISTS', KEYS[2], fp) == 0 then
    local seq = redis.call('INCR', KEYS[4])
    local member = struct.pack('>i8', seq) .. fp
    redis.call('HSET', KEYS[2], fp, member)
    redis.call('HSET', KEYS[3], member, ARGV[i + 2])
    redis.call('ZADD', KEYS[1], -tonumber(ARGV[i + 1]), member)
    added = added + 1
  end
end
return added
"""


POP_FRONTIER_LUA = r"""
-- KEYS frontier, frontier:fp, frontier:req; ARGV how many.
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
local out = {}
for i = 1, #popped, 2 do
  local member = popped[i]
  out[#out + 1] = redis.call('HGET', KEYS[3], member)
  redis.call('HDEL', KEYS[3], member)
  redis.call('HDEL', KEYS[2], string.sub(member, 9))
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


#: Set fields of a side-storage hash (a script only so that the epoch guard covers it).
#: KEYS[1] the table's hash; ARGV (key, value) pairs.
SIDE_PUT_LUA = r"""
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 0
"""


#: Delete fields of a side-storage hash (a script for the epoch guard). KEYS[1] the
#: table's hash; ARGV the keys.
SIDE_DELETE_LUA = r"""
for i = 1, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return 0
"""


#: Reserve a block of URL ids of a shard (a script only so that the epoch guard covers
#: it: an INCRBY into a reset store would re-create its counter). KEYS next; ARGV size.
RESERVE_IDS_LUA = r"""
return redis.call('INCRBY', KEYS[1], ARGV[1])
"""


#: Advance the cycle counter (a script only so that the epoch guard covers it). KEYS cycle.
ADVANCE_CYCLE_LUA = r"""
return redis.call('INCR', KEYS[1])
"""


#: The error a guarded script answers with when the store's epoch is not the caller's.
LOST_ERROR = "RECRAWL_STORE_LOST"

# Prepended to every script that writes (history/epoch.py). The caller appends one key,
# the meta hash holding the epoch (the store's, or the shard's copy: in the script's
# slot), and one argument, the epoch it opened; the script below sees local KEYS and
# ARGV without them (copies: newer Redis versions may make the globals read-only), and
# EPOCH_META. A store that vanished (no epoch) or was replaced (another one) gets
# nothing written, not even half a visit.
_EPOCH_GUARD_LUA = r"""
local EPOCH_META = KEYS[#KEYS]
local EPOCH_WANT = ARGV[#ARGV]
local EPOCH_HAVE = redis.call('HGET', EPOCH_META, 'epoch')
if EPOCH_HAVE ~= EPOCH_WANT then
  return redis.error_reply('RECRAWL_STORE_LOST ' .. (EPOCH_HAVE or ''))
end
local EPOCH_KEYS, EPOCH_ARGV = {}, {}
for i = 1, #KEYS - 1 do EPOCH_KEYS[i] = KEYS[i] end
for i = 1, #ARGV - 1 do EPOCH_ARGV[i] = ARGV[i] end
local KEYS, ARGV = EPOCH_KEYS, EPOCH_ARGV
"""


def guarded(script: str) -> str:
    """``script``, refusing to run unless the store's epoch is the caller's (its last key:
    the meta hash; its last argument: the epoch)."""
    return _EPOCH_GUARD_LUA + script


# -- the keys of schema versions 1 to 4 (one slot-less name per kind), for migrations --

MIGRATE_1_TO_2_LUA = r"""
-- Version 2: paper 004's {p}:bags / {p}:dists hashes become side-storage tables.
-- KEYS meta, bags, dists, side bags, side dists. Atomic: all of it or none.
if tonumber(redis.call('HGET', KEYS[1], 'schema_version')) ~= 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('RENAME', KEYS[2], KEYS[4]) end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('RENAME', KEYS[3], KEYS[5]) end
redis.call('HSET', KEYS[1], 'schema_version', 2)
return 1
"""


#: The first name after the prefix of every key a RedisHistoryStore writes
#: (``<prefix>:rows:3``, ``<prefix>:side:basket_model``, ...): what clear() deletes.
STORE_KEY_NAMES = frozenset(
    {"meta", "cycle", "ids", "next_id", "log", "logstart", "frontier", "rows", "side"}
    | {"urls", "req", "sig", "body", "etag", "lastmod", "bags", "dists"}
)


def delete_own_keys(client: Any, prefix: str) -> None:
    """Delete the store's own keys under ``prefix`` (not a longer prefix's), in batches."""
    keys = [
        k for k in client.scan_iter(match=f"{prefix}:*", count=1000) if own_key(k, len(prefix) + 1)
    ]
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])


def own_key(key: bytes | str, skip: int) -> bool:
    """Whether ``key``, less its first ``skip`` characters (the prefix and ``:``), is
    one of the store's own (not a longer prefix's, such as ``recrawl:<spider>:...``)."""
    name = key.decode("latin-1") if isinstance(key, bytes) else key
    return name[skip:].split(":", 1)[0] in STORE_KEY_NAMES


MIGRATE_2_TO_3_LUA = r"""
-- Version 3: the store names the spider it belongs to (meta field 'spider'). A store
-- written before has none: nothing to move; the first spider to open it adopts it.
-- KEYS meta.
if tonumber(redis.call('HGET', KEYS[1], 'schema_version')) ~= 2 then return 0 end
redis.call('HSET', KEYS[1], 'schema_version', 3)
return 1
"""


#: Replace hash fields only if they still hold what was read (another process may have
#: written a new value meanwhile): KEYS[1] the hash; ARGV (field, old, new) triples, new
#: '' deletes the field. Returns how many were replaced or deleted.
COMPARE_AND_SET_LUA = r"""
local done = 0
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    if ARGV[i + 2] == '' then
      redis.call('HDEL', KEYS[1], ARGV[i])
    else
      redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    end
    done = done + 1
  end
end
return done
"""


def v4_requests_as_data(client: Any, prefix: str) -> dict[str, int]:
    """Version 4: the stored requests (``{p}:req``, ``{p}:frontier:req``) become data.

    Each version-3 pickle is read allowing no global (:mod:`.legacy_pickle`: no code
    runs) and re-encoded by :mod:`.request_codec`, field by field with a
    compare-and-set (a crawl already on version 4 may write meanwhile); one that
    needs a global is deleted -- a URL's request (the URL stays and is recrawled as a
    GET of it), or a frontier entry with its zset member and fingerprint. Run again
    after an interruption, it finds what it re-encoded already and keeps it.
    Returns how many of each were dropped.
    """
    from .legacy_pickle import reencode_request

    script = client.register_script(COMPARE_AND_SET_LUA)
    dropped = {"requests": 0, "frontier": 0}
    for name, kind in (("req", "requests"), ("frontier:req", "frontier")):
        key = f"{prefix}:{name}"
        args: list[bytes] = []
        gone: list[bytes] = []
        for field, blob in client.hscan_iter(key, count=1000):
            new = reencode_request(blob)
            if new == blob:
                continue
            args += [field, blob, new if new is not None else b""]
            if new is None:
                gone.append(field)
            if len(args) >= 3000:
                script(keys=[key], args=args)
                args = []
        if args:
            script(keys=[key], args=args)
        dropped[kind] = len(gone)
        if kind == "frontier" and gone:
            # the field is the zset's member: an 8-byte sequence number, then the
            # fingerprint (the field of {p}:frontier:fp)
            pipe = client.pipeline()
            for member in gone:
                pipe.zrem(f"{prefix}:frontier", member)
                pipe.hdel(f"{prefix}:frontier:fp", member[8:])
            pipe.execute()
    return dropped


def widen_rows_v3(blob: bytes) -> bytes:
    """Version 4's part for failed downloads: 112-byte rows -> 120-byte rows with
    ``failures`` 0 and ``last_failure_cycle`` -1 (nothing before counted them)."""
    old = np.frombuffer(blob[: len(blob) - len(blob) % ROW_DTYPE_V3.itemsize], dtype=ROW_DTYPE_V3)
    new = np.zeros(len(old), dtype=ROW_DTYPE_V4)
    for name in ROW_DTYPE_V3.names or ():
        new[name] = old[name]
    new["last_failure_cycle"] = -1
    return new.tobytes()
