-- Set fields of a side-storage hash (a script only so that the epoch guard covers it).
-- KEYS[1] the table's hash; ARGV (key, value) pairs.
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 0
