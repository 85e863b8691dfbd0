-- The one reading of a URL's stored blob (history_record and history_get start with it):
-- in the shard's bigreq hash when its length is BIG_BLOB, else rlen bytes of the shard's
-- blobs string at roff (false: none).
local BIG_BLOB = 65535  -- redis_schema.BIG_BLOB
local function stored_blob(blobs, bigreq, id, rlen, roff)
  if rlen == BIG_BLOB then return redis.call('HGET', bigreq, id) end
  if rlen > 0 then return redis.call('GETRANGE', blobs, roff, roff + rlen - 1) end
  return false
end
