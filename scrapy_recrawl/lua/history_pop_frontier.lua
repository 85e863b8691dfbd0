-- KEYS frontier, frontier:fp, frontier:req; ARGV how many.
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
local out = {}
for i = 1, #popped, 2 do
  local member = popped[i]
  out[#out + 1] = redis.call('HGET', KEYS[3], member)
  redis.call('HDEL', KEYS[3], member)
  redis.call('HDEL', KEYS[2], string.sub(member, 9))
end
return out
