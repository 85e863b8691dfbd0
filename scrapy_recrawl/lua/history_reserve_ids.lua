-- Reserve a block of URL ids of a shard (a script only so that the epoch guard covers
-- it: an INCRBY into a reset store would re-create its counter). KEYS next; ARGV size.
return redis.call('INCRBY', KEYS[1], ARGV[1])
