-- A URL's record in one round trip. KEYS: its index bucket, rows, blobs, bigreq, etag,
-- lastmod, sig, body; ARGV: field, shards, want signature, want body.
-- Returns id, row, blob, etag, lastmod, [signature], [body] (false: unknown URL).
local ROWSIZE = 87  -- redis_schema.ROW_SIZE
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return false end
local S = tonumber(ARGV[2])
local off = math.floor((tonumber(id) - 1) / S) * ROWSIZE
local row = redis.call('GETRANGE', KEYS[2], off, off + ROWSIZE - 1)
local rlen, roff = struct.unpack('<I2I4', string.sub(row, 34, 39))
local blob = stored_blob(KEYS[3], KEYS[4], id, rlen, roff)
local sig = false
if ARGV[3] == '1' then sig = redis.call('HGET', KEYS[7], id) end
local body = false
if ARGV[4] == '1' then body = redis.call('HGET', KEYS[8], id) end
return {tonumber(id), row, blob, redis.call('HGET', KEYS[5], id),
  redis.call('HGET', KEYS[6], id), sig, body}
