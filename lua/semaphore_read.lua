-- semaphore_read: describe a semaphore's live permits. Writes nothing
-- (expired permits are counted out, not pruned).
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
--
-- Reply    {capacity, used, holders, no_expiry_holders, now_ms, mode}
--          capacity is the recorded capacity (0 when the key does not
--          exist); used is the sum of the live holders' permits; holders
--          counts live holders, no_expiry_holders those without expiry;
--          mode is 0 with the "capacity" record, 1 with "capacity-set"
--          (the capacity was set in the key), 2 when besides the
--          semaphore is draining.
-- Errors   WRONGTYPE       the key is not a sorted set (raised by ZMSCORE)
--          COORD_BADSTATE  the capacity record is missing or malformed, a
--                          record's score is outside the layout (fragment
--                          semaphore_state), or a live member is not a
--                          permit
local key = KEYS[1]

--#include time_ms

local r = redis.call('ZMSCORE', key, 'capacity', 'multi', 'waiting')
--#include semaphore_set
if not r[1] then
  return {0, 0, 0, 0, now, 0}
end
local mine = false
--#include semaphore_state
local live = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', now), '+inf')
local used = 0
for _, m in ipairs(live) do
  local w = string.match(m, '^P:(%d+):')
  w = w and tonumber(w)
  if w == nil then
    return redis.error_reply('COORD_BADSTATE semaphore key holds a member that is not a permit')
  end
  used = used + w
end
local forever = redis.call('ZCOUNT', key, '+inf', '+inf')
local mode = 0
if draining then
  mode = 2
elseif fixed then
  mode = 1
end
return {cap, used, #live, forever, now, mode}
