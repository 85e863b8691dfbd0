-- Advance the cycle counter (a script only so that the epoch guard covers it). KEYS cycle.
return redis.call('INCR', KEYS[1])
