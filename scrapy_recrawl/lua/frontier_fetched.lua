-- Note a URL fetched in this cycle (behind frontier_fence.lua): KEYS[1] the cycle's
-- hash; ARGV the fingerprint and "s" (the spider's own dont_filter request) or "x".
-- Returns 1: fetch it, 0: fetched already. Atomic, so two processes never both fetch
-- a URL (frontier/base.py: first_fetch).
local before = redis.call('HGET', KEYS[1], ARGV[1])
if before and (ARGV[2] ~= 's' or before ~= 's') then return 0 end
if not before then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
