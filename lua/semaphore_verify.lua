-- semaphore_verify: report whether a holder's permits are live. Writes
-- nothing.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  permit id: the holder's member, "P:<n>:<token>"
--
-- Reply    {1, remaining_ms, now_ms}  live; remaining_ms (>= 1) until it
--                                     expires, -1 when it has no expiry
--          {0, 0, now_ms}             gone or expired
-- Errors   WRONGTYPE       the key is not a sorted set (raised by ZSCORE)
--          COORD_BADSTATE  the sorted set lacks a valid capacity record
local key = KEYS[1]

--#include time_ms

local c = redis.call('ZSCORE', key, 'capacity')
if not c then
  if redis.call('EXISTS', key) == 1 then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  return {0, 0, now}
end
c = tonumber(c)
if c == nil or c >= 0 or c ~= math.floor(c) then
  return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
end
local s = redis.call('ZSCORE', key, ARGV[1])
if not s then
  return {0, 0, now}
end
local v = tonumber(s)
if v == nil or v == math.huge then
  return {1, -1, now}
end
if v > now then
  return {1, v - now, now}
end
return {0, 0, now}
