-- rwlease_verify: report whether a holder's read or write lease is live.
-- Writes nothing.
--
-- KEYS[1]  read-write lease key (layout in rwlease_acquire.lua)
-- ARGV[1]  lease id: the holder's member, "R:<token>" or "W:<token>"
--
-- Reply    {1, remaining_ms, now_ms}  live; remaining_ms (>= 1) until it
--                                     expires
--          {0, 0, now_ms}             gone or expired
-- Errors   WRONGTYPE     the key is not a sorted set (raised by ZSCORE)
--          COORD_BADARG  ARGV[1] is not "R:<token>" or "W:<token>"
local key, member = KEYS[1], ARGV[1]
--#include rwlease_member

--#include time_ms

local mine = redis.call('ZSCORE', key, member)
if mine then
  local exp = tonumber(mine)
  if exp > now then
    return {1, exp - now, now}
  end
end
return {0, 0, now}
