-- latch_join: read the current generation of a latch. Writes nothing.
--
-- KEYS[1]  latch key (layout in latch_create.lua)
--
-- Reply    {id, gen, count, initial, deadline_ms, now_ms}  the current
--                                  generation (id is a string, the rest
--                                  integers; deadline_ms 0 for none)
--          false                   no latch at the key
-- Errors   WRONGTYPE       the key is not a hash (raised by HMGET)
--          COORD_BADSTATE  the hash is not a latch
local key = KEYS[1]

--#include time_ms

local v = redis.call('HMGET', key, 'id', 'gen', 'count', 'initial', 'deadline')
if not (v[1] or v[2] or v[3] or v[4] or v[5]) and redis.call('EXISTS', key) == 0 then
  return false
end
local g, c, i, d = tonumber(v[2]), tonumber(v[3]), tonumber(v[4]), tonumber(v[5])
if not v[1] or g == nil or c == nil or i == nil or d == nil then
  return redis.error_reply('COORD_BADSTATE latch key holds a hash that is not a latch')
end
return {v[1], g, c, i, d, now}
