-- semaphore_refresh: set a new expiry on a holder's live permits.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  permit id: the holder's member, "P:<n>:<token>"
-- ARGV[2]  new TTL in milliseconds from now (integer >= 1), or 0 for no
--          expiry
--
-- Reply    1  the member was live; it now expires ARGV[2] ms after the
--             server's TIME (or never); the key's TTL follows the latest
--             expiry
--          0  the member is gone or expired (an expired member is removed:
--             an expired holder never revives its permit; the key is
--             deleted when no permit is left)
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a sorted set
--   COORD_BADSTATE  the sorted set lacks a valid capacity record, or holds
--                   a score outside the layout (fragment semaphore_state)
local key = KEYS[1]
local member = ARGV[1]
local ttl = tonumber(ARGV[2])

-- The records and the caller's member, in one call.
local r = redis.call('ZMSCORE', key, 'capacity', 'waiting', 'multi', member)
if not r[1] then
  if redis.call('EXISTS', key) == 1 then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  return 0
end

--#include time_ms
--#include semaphore_state
--#include semaphore_expiry
local waiting = r[2] ~= false
local s = r[4]
local c, records = checked(r, s)
if c == nil then
  return records
end
if not s then
  return 0
end

local v = expiry(s)
local forever = v == math.huge
if not forever and v <= now then
  -- Expired: remove it, never revive it.
  redis.call('ZREM', key, member)
  if redis.call('ZCARD', key) <= records then
    redis.call('DEL', key)
  end
  return 0
end

local score = '+inf'
if ttl > 0 then
  score = string.format('%d', now + ttl)
end
redis.call('ZADD', key, 'XX', score, member)
if score == '+inf' then
  redis.call('PERSIST', key)
elseif (forever and redis.call('ZCOUNT', key, '+inf', '+inf') == 0) or
    (not forever and now + ttl < v and redis.call('PEXPIRETIME', key) == v) then
  -- The key expired with this permit (the last one without expiry, or the
  -- latest expiry, now shortened): it expires with the latest permit.
  expire_latest()
else
  extend(score)
end
return 1
