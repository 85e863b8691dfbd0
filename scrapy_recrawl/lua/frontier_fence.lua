-- The fence of the distributed frontier (frontier/redis.py), prepended to every
-- script that writes a frontier key. The caller appends one key, {s}:epoch, and one
-- argument, the epoch it took at open; the script after this prelude sees its own
-- KEYS and ARGV without them. A frontier whose epoch key is gone (its store was
-- reset) or holds another epoch gets nothing written: the error names what it holds.
local FENCE_HAVE = redis.call('GET', KEYS[#KEYS])
if FENCE_HAVE ~= ARGV[#ARGV] then
  return redis.error_reply('RECRAWL_STORE_LOST ' .. (FENCE_HAVE or ''))
end
local FENCE_KEYS, FENCE_ARGV = {}, {}
for i = 1, #KEYS - 1 do FENCE_KEYS[i] = KEYS[i] end
for i = 1, #ARGV - 1 do FENCE_ARGV[i] = ARGV[i] end
local KEYS, ARGV = FENCE_KEYS, FENCE_ARGV
