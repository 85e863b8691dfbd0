-- Reserve one budgeted request of the shared cycle (behind frontier_fence.lua):
-- KEYS[1] the counters hash; ARGV total (-1: no limit), side ("new" or "recrawl"),
-- the side's quota (-1: no limit). Returns 1 if reserved, 0 if the budget is spent.
local total = tonumber(ARGV[1])
local quota = tonumber(ARGV[3])
local taken = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
if total >= 0 and taken >= total then return 0 end
local side = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '0')
if quota >= 0 and side >= quota then return 0 end
redis.call('HINCRBY', KEYS[1], 'total', 1)
redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
return 1
