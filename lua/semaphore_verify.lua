-- semaphore_verify: report whether a holder's permits are live. Writes
-- nothing.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  permit id: the holder's member, "P:<n>:<token>"
--
-- Reply    {1, remaining_ms, now_ms}  live; remaining_ms (>= 1) until it
--                                     expires, -1 when it has no expiry
--          {0, 0, now_ms}             gone or expired (or a tombstone,
--                                     semaphore_abandon)
-- Errors   WRONGTYPE       the key is not a sorted set (raised by ZMSCORE)
--          COORD_BADSTATE  the sorted set lacks a valid capacity record, or
--                          a record's or the caller's member's score is
--                          outside the layout (fragment semaphore_state)
local key = KEYS[1]

--#include time_ms

local r = redis.call('ZMSCORE', key, 'capacity', 'multi', 'waiting', ARGV[1])
--#include semaphore_set
if not r[1] then
  return {0, 0, now}
end
local mine = r[4]
--#include semaphore_state
if not mine or stone then
  return {0, 0, now} -- (a tombstone, semaphore_abandon, is no permit)
end
if mine_at == math.huge then
  return {1, -1, now}
end
if mine_at > now then
  return {1, mine_at - now, now}
end
return {0, 0, now}
