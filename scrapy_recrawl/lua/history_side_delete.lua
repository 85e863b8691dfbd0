-- Delete fields of a side-storage hash (a script for the epoch guard). KEYS[1] the
-- table's hash; ARGV the keys.
for i = 1, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return 0
