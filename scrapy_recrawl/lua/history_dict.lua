-- A dictionary of what repeats (request shapes; schemes and hosts): KEYS the entries
-- (id -> value), their index (value -> id); ARGV values. Returns each value's id,
-- adding the new ones (0: the dictionary is full).
local MAX_SHAPES = 65535  -- redis_schema.MAX_SHAPES
local out = {}
for i = 1, #ARGV do
  local id = redis.call('HGET', KEYS[2], ARGV[i])
  if not id then
    if redis.call('HLEN', KEYS[1]) >= MAX_SHAPES then
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
