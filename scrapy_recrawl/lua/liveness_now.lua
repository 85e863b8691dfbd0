-- The Redis's own clock (KEYS[1]: a key of the hash's slot, so on a cluster the master
-- every holder stamps with answers): read only, no write. {seconds, microseconds}.
local t = redis.call('TIME')
return {t[1], t[2]}
