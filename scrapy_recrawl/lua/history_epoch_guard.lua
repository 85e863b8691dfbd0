-- Prepended to every script of the history store that writes (history/epoch.py). The
-- caller appends one key, the meta hash holding the epoch (the store's, or the shard's
-- copy: in the script's slot), and one argument, the epoch it opened; the script after
-- it sees local KEYS and ARGV without them (copies: newer Redis versions may make the
-- globals read-only), and EPOCH_META. A store that vanished (no epoch) or was replaced
-- (another one) gets nothing written, not even half a visit.
local EPOCH_META = KEYS[#KEYS]
local EPOCH_WANT = ARGV[#ARGV]
local EPOCH_HAVE = redis.call('HGET', EPOCH_META, 'epoch')
if EPOCH_HAVE ~= EPOCH_WANT then
  return redis.error_reply('RECRAWL_STORE_LOST ' .. (EPOCH_HAVE or ''))
end
local EPOCH_KEYS, EPOCH_ARGV = {}, {}
for i = 1, #KEYS - 1 do EPOCH_KEYS[i] = KEYS[i] end
for i = 1, #ARGV - 1 do EPOCH_ARGV[i] = ARGV[i] end
local KEYS, ARGV = EPOCH_KEYS, EPOCH_ARGV
