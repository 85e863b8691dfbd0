-- KEYS frontier, frontier:fp, frontier:req, frontier:seq; ARGV (fingerprint, priority,
-- request blob) triples. Keeps the first copy of a fingerprint (INSERT OR IGNORE);
-- order: priority desc, then oldest first.
local added = 0
for i = 1, #ARGV, 3 do
  local fp = ARGV[i]
  if redis.call('HEXISTS', KEYS[2], fp) == 0 then
    local seq = redis.call('INCR', KEYS[4])
    local member = struct.pack('>i8', seq) .. fp
    redis.call('HSET', KEYS[2], fp, member)
    redis.call('HSET', KEYS[3], member, ARGV[i + 2])
    redis.call('ZADD', KEYS[1], -tonumber(ARGV[i + 1]), member)
    added = added + 1
  end
end
return added
