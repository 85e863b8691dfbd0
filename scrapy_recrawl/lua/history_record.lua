-- Fold a batch of visits of one shard into their URLs' rows and append them to the
-- shard's visit log; each visit as SqliteHistoryStore.record() and state.observe()
-- do it. KEYS: rows, blobs, bigreq, etag, lastmod, sig, body, log, logstart, then the
-- index buckets the visits name. ARGV: row format, log format, log cap, shards, the
-- current cycle, then one argument per visit (VISIT_FORMAT, then its strings). Returns
-- the visits' ids (i4 each) and their new rows, as two strings.
local NO_COUNT = 65535  -- redis_schema.NO_COUNT
local BIG_BLOB = 65535  -- redis_schema.BIG_BLOB
local FMT, LOGFMT = ARGV[1], ARGV[2]
local VFMT = '<I2i4di4i4i4i4i4i4i4i8i4i4c8i4i4i4i4i4i4i4'  -- redis_schema.VISIT_FORMAT_LUA
local logcap = tonumber(ARGV[3])
local S = tonumber(ARGV[4])
local cur = tonumber(ARGV[5])
local ROWSIZE = 87  -- redis_schema.ROW_SIZE
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
    aad, gad, lvt, lct, fs, D, A, R, M = 0, 0, nan, nan, t, NO_COUNT, NO_COUNT,
      NO_COUNT, NO_COUNT
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
    D = math.max(0, math.min(distance, NO_COUNT - 1))
    A = math.max(0, math.min(added, NO_COUNT - 1))
    R = math.max(0, math.min(removed, NO_COUNT - 1))
    M = math.max(0, math.min(modified, NO_COUNT - 1))
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
      if rlen == BIG_BLOB then redis.call('HDEL', KEYS[3], id) end
      if string.len(blob) >= BIG_BLOB then
        redis.call('HSET', KEYS[3], id, blob)
        rlen, roff = BIG_BLOB, 0
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
