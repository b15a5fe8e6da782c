-- rwlease_refresh: set a new expiry on a holder's live read or write
-- lease.
--
-- KEYS[1]  read-write lease key (layout in rwlease_acquire.lua)
-- ARGV[1]  lease id: the holder's member, "R:<token>" or "W:<token>"
-- ARGV[2]  new TTL in milliseconds from now (integer >= 1)
--
-- Reply    {1, now_ms}  the entry was live; it now expires ARGV[2] ms after
--                       now_ms
--          {0, now_ms}  the entry is gone or expired (an expired entry is
--                       pruned, with every other expired entry); an expired
--                       holder never revives its lease
--          The key's TTL follows the latest expiry.
-- Errors (raised before anything is written):
--   WRONGTYPE     the key is not a sorted set (raised by ZSCORE)
--   COORD_BADARG  ARGV[1] is not "R:<token>" or "W:<token>"
--   COORD_BADSTATE the key's lowest or highest score is not an integer
--                 within the longest TTL of 0 (fragment rwlease_prune)
local key, member = KEYS[1], ARGV[1]
local ttl = tonumber(ARGV[2])
--#include rwlease_member

--#include time_ms
local nows = string.format('%d', now)
--#include rwlease_prune

local mine = redis.call('ZSCORE', key, member)
local live = mine ~= false and tonumber(mine) > now
if live then
  redis.call('ZADD', key, 'XX', string.format('%d', now + ttl), member)
end
prune()
settle()
if live then
  return {1, now}
end
return {0, now}
