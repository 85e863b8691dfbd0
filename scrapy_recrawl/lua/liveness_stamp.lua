-- A holder's status, stamped with the Redis's clock (history/redis_liveness.py). KEYS[1]
-- the hash; ARGV the holder id, the status's other fields as a JSON object this package
-- wrote ('{}': none), and the hash's expiry in milliseconds (0: none; only ever
-- lengthened, so a holder with a shorter timeout never cuts another's lease short).
-- Returns the time seen. Scripts replicate their effects (Redis >= 5 by default; asked
-- for on older ones), so a write after TIME is allowed.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local seen = string.format('%d.%06d', tonumber(t[1]), tonumber(t[2]))
local fields = string.sub(ARGV[2], 1, -2)
if fields ~= '{' then fields = fields .. ', ' end
redis.call('HSET', KEYS[1], ARGV[1], fields .. '"seen": ' .. seen .. '}')
local expire = tonumber(ARGV[3])
if expire > 0 and redis.call('PTTL', KEYS[1]) < expire then
  redis.call('PEXPIRE', KEYS[1], expire)
end
return seen
