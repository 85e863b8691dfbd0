-- Prepend one item (u32 length + bytes) to a side-storage list, keep the newest
-- ARGV[3]; returns the list as it was. KEYS[1] the table's hash; ARGV key, item, keep.
local old = redis.call('HGET', KEYS[1], ARGV[1])
local keep = tonumber(ARGV[3])
local out = struct.pack('<I4', string.len(ARGV[2])) .. ARGV[2]
if old and keep > 1 then
  local pos, kept = 1, 1
  while pos <= string.len(old) and kept < keep do
    local len = struct.unpack('<I4', string.sub(old, pos, pos + 3))
    out = out .. string.sub(old, pos, pos + 3 + len)
    pos = pos + 4 + len
    kept = kept + 1
  end
end
redis.call('HSET', KEYS[1], ARGV[1], out)
return old or ''
