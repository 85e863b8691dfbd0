"""The Redis store's encoding: the fixed-width row and log entry, and its Lua scripts.

Each script takes every key it touches in KEYS or builds it from the store's prefix
(docs/distributed.md); the row and log formats are shared with numpy
(:data:`ROW_DTYPE`, :data:`LOG_DTYPE`) so a scan of millions of rows is a few reads.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

#: One URL's numbers, as the Lua script packs them (struct format ``ROW_FORMAT``).
#: Schema version 4 added ``failures`` and ``last_failure_cycle`` (120 bytes a row).
ROW_DTYPE = np.dtype(
    [
        ("n", "<i4"),
        ("X", "<i4"),
        ("visits", "<i4"),
        ("status", "<i4"),
        ("last_visit_cycle", "<i4"),
        ("last_change_cycle", "<i4"),
        ("first_cycle", "<i4"),
        ("failures", "<i4"),  # consecutive failed cycles (history/state.py: fold_failure)
        ("last_failure_cycle", "<i4"),  # -1: never failed
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


ROW_FORMAT = "<i4i4i4i4i4i4i4i4i4BBBBdddddddddd"
ROW_SIZE = ROW_DTYPE.itemsize
assert ROW_SIZE == struct.calcsize("<iiiiiiiiiBBBBdddddddddd") == 120

#: The row of schema versions 1 to 3 (112 bytes): read once, by the migration to 4.
ROW_DTYPE_V3 = np.dtype(
    [f for f in ROW_DTYPE.descr if f[0] not in ("failures", "last_failure_cycle")]
)
assert ROW_DTYPE_V3.itemsize == 112


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


#: Rows per ``{p}:rows:{shard}`` string: 2**20 * 120 bytes = 120 MiB, under Redis's 512 MiB.
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
local ROWSIZE = __ROWSIZE__

local cur = tonumber(redis.call('GET', P .. ':cycle') or '0')
local cycle = cur
if vcycle ~= '' then cycle = tonumber(vcycle) end
local nan = 0 / 0

local n, X, visits, st, lvc, lcc, fc, fails, lfc, gone, hb, present, cw
local sad, aad, gad, lvt, lct, fs, D, A, R, M
local id = redis.call('HGET', P .. ':ids', fp)
local shard, off
if id then
  id = tonumber(id)
  shard = math.floor((id - 1) / rps)
  off = ((id - 1) % rps) * ROWSIZE
  local row = redis.call('GETRANGE', P .. ':rows:' .. shard, off, off + ROWSIZE - 1)
  n, X, visits, st, lvc, lcc, fc, fails, lfc, gone, hb, present, cw,
    sad, aad, gad, lvt, lct, fs, D, A, R, M = struct.unpack(FMT, row)
else
  id = redis.call('INCR', P .. ':next_id')
  redis.call('HSET', P .. ':ids', fp, id)
  shard = math.floor((id - 1) / rps)
  off = ((id - 1) % rps) * ROWSIZE
  n, X, visits, st, lvc, lcc, fc, fails, lfc, gone, hb, present, cw =
    0, 0, 0, 0, -1, -1, cur, 0, -1, 0, 0, 1, 0
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
-- state.fold_failure: consecutive failed cycles (status 0), one per cycle
if status == 0 then
  if not (lfc == cycle and fails > 0) then fails = fails + 1 end
  lfc = cycle
else
  fails = 0
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

local newrow = struct.pack(FMT, n, X, visits, st, lvc, lcc, fc, fails, lfc, gone, hb, present, cw,
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
""".replace("__ROWSIZE__", str(ROW_SIZE))


GET_LUA = r"""
-- A URL's record in one round trip: id, row, url, validators, [signature], [body].
local P = ARGV[1]
local id = redis.call('HGET', P .. ':ids', ARGV[2])
if not id then return false end
local rps = tonumber(ARGV[5])
local n = tonumber(id)
local off = ((n - 1) % rps) * __ROWSIZE__
local row = redis.call('GETRANGE', P .. ':rows:' .. math.floor((n - 1) / rps), off,
  off + __ROWSIZE__ - 1)
local sig = false
if ARGV[3] == '1' then sig = redis.call('HGET', P .. ':sig', id) end
local body = false
if ARGV[4] == '1' then body = redis.call('HGET', P .. ':body', id) end
return {n, row, redis.call('HGET', P .. ':urls', id), redis.call('HGET', P .. ':etag', id),
  redis.call('HGET', P .. ':lastmod', id), sig, body}
""".replace("__ROWSIZE__", str(ROW_SIZE))


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


#: The error a guarded script answers with when the store's epoch is not the caller's.
LOST_ERROR = "RECRAWL_STORE_LOST"

# Prepended to every script that writes (history/epoch.py). The caller appends two
# arguments, the epoch it opened and the meta key; the script below sees a local ARGV
# without them, so its own arguments are unchanged (a copy: newer Redis versions may
# make the global ARGV read-only). A store that vanished (no epoch) or was replaced
# (another one) gets nothing written, not even half a visit.
_EPOCH_GUARD_LUA = r"""
local EPOCH_META = ARGV[#ARGV]
local EPOCH_WANT = ARGV[#ARGV - 1]
local EPOCH_HAVE = redis.call('HGET', EPOCH_META, 'epoch')
if EPOCH_HAVE ~= EPOCH_WANT then
  return redis.error_reply('RECRAWL_STORE_LOST ' .. (EPOCH_HAVE or ''))
end
local EPOCH_ARGV = {}
for i = 1, #ARGV - 2 do EPOCH_ARGV[i] = ARGV[i] end
local ARGV = EPOCH_ARGV
"""


def guarded(script: str) -> str:
    """``script``, refusing to run unless the store's epoch is the caller's (its last two
    arguments: epoch, meta key)."""
    return _EPOCH_GUARD_LUA + script


#: Advance the cycle counter (a script only so that the epoch guard covers it). ARGV prefix.
ADVANCE_CYCLE_LUA = r"""
return redis.call('INCR', ARGV[1] .. ':cycle')
"""


def widen_rows_v3(blob: bytes) -> bytes:
    """Version 4's part for failed downloads: 112-byte rows -> 120-byte rows with
    ``failures`` 0 and ``last_failure_cycle`` -1 (nothing before counted them)."""
    old = np.frombuffer(blob[: len(blob) - len(blob) % ROW_DTYPE_V3.itemsize], dtype=ROW_DTYPE_V3)
    new = np.zeros(len(old), dtype=ROW_DTYPE)
    for name in ROW_DTYPE_V3.names or ():
        new[name] = old[name]
    new["last_failure_cycle"] = -1
    return new.tobytes()
