-- One write command behind the fence (frontier_fence.lua before it): KEYS[1] its
-- key; ARGV the command's name (one of frontier/redis.py's FENCED_COMMANDS, named by
-- the package, never read from Redis) and its arguments after the key.
local call = {ARGV[1], KEYS[1]}
for i = 2, #ARGV do call[i + 1] = ARGV[i] end
return redis.call(unpack(call))
