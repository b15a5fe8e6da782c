-- semaphore_configure: set a semaphore's capacity in its key, or drain it,
-- or resume granting after a drain. Held permits are never revoked.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  'capacity', 'drain' or 'resume'
-- ARGV[2]  capacity (integer, 1 <= capacity <= 2^53-1): with 'capacity'
--          the new capacity; with 'drain' the capacity recorded when the
--          key does not exist (the caller's); unused with 'resume'
--
-- 'capacity'  records ARGV[2] as "capacity-set" (replacing the
--             "capacity" record): from now on every contender grants by
--             it, whatever capacity it passes, and the key loses its TTL
--             and stays (created when absent). Live permits stay, even
--             above the new capacity; no new one is granted until the
--             permits in use fall below it. When the capacity rose, the
--             semaphore is not draining and a blocked acquisition waits
--             (the "waiting" record, removed), waiters are notified on
--             the key's channel (fragment notify).
-- 'drain'     adds the "draining" record (nothing is granted) and, when
--             the key has "capacity", replaces it with "capacity-set"
--             (the key loses its TTL and stays; created with ARGV[2] as
--             its capacity when absent); prunes expired permits (and
--             expired tombstones) and
--             reports whether any is live; when one is, adds the
--             "waiting" record so that a release notifies. Re-run it to
--             wait.
-- 'resume'    removes the "draining" record and notifies waiters when
--             the "waiting" record is there (removed); writes nothing
--             when the semaphore is not draining.
--
-- Reply    0         done ('drain': no permit is live)
--          retry_ms  'drain' only, a permit is live (an integer >= 1): the
--                    time until the earliest live permit expires; -1 when
--                    none of them expires
-- Errors (all raised before anything is written):
--   WRONGTYPE       the key is not a sorted set
--   COORD_BADARG    ARGV[1] is none of the three, or ARGV[2] is not an
--                   integer capacity in 1..2^53-1
--   COORD_BADSTATE  the sorted set lacks a valid capacity record, or a
--                   record's score or the earliest live permit's (a
--                   drain's retry time) is outside the layout (fragments
--                   semaphore_set, semaphore_state)
--#include notify
local key = KEYS[1]
local verb = ARGV[1]
local want = tonumber(ARGV[2])
if verb ~= 'capacity' and verb ~= 'drain' and verb ~= 'resume' then
  return redis.error_reply('COORD_BADARG semaphore_configure verb is not capacity, drain or resume')
end
if verb ~= 'resume' and (want == nil or want < 1 or want > 9007199254740991 or want % 1 ~= 0) then
  return redis.error_reply('COORD_BADARG capacity is not an integer in 1..2^53-1')
end

local r = redis.call('ZMSCORE', key, 'capacity', 'multi', 'waiting')
--#include semaphore_set
if not r[1] then
  if verb == 'capacity' then
    redis.call('ZADD', key, -want, 'capacity-set')
  elseif verb == 'drain' then
    redis.call('ZADD', key, -want, 'capacity-set', -1, 'draining')
  end
  return 0
end

--#include time_ms
local mine = false
--#include semaphore_state

if verb == 'capacity' then
  if not fixed then
    -- ZADD first: a server out of memory refuses it as the first write,
    -- leaving the key as it was.
    redis.call('ZADD', key, -want, 'capacity-set')
    redis.call('ZREM', key, 'capacity')
    redis.call('PERSIST', key)
  elseif want ~= cap then
    redis.call('ZADD', key, -want, 'capacity-set')
  end
  if want > cap and not draining and r[3] then
    redis.call('ZREM', key, 'waiting')
    wake('capacity')
  end
  return 0
end

if verb == 'resume' then
  if draining then
    if r[3] then
      redis.call('ZREM', key, 'draining', 'waiting')
      wake('resumed')
    else
      redis.call('ZREM', key, 'draining')
    end
  end
  return 0
end

-- drain: read the earliest live permit before anything is written.
local nows = string.format('%d', now)
local first = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local v = nil
if first[1] then
  v = expiry(first[2])
  if v == nil then
    return redis.error_reply(outside)
  end
end
if not fixed then
  redis.call('ZADD', key, -cap, 'capacity-set', -1, 'draining')
  redis.call('ZREM', key, 'capacity')
  redis.call('PERSIST', key)
elseif not draining then
  redis.call('ZADD', key, -1, 'draining')
end
-- Expired permits and tombstones (semaphore_abandon).
redis.call('ZREMRANGEBYSCORE', key, -now / 8796093022208, nows)
if v == nil then
  return 0
end
if not r[3] then
  redis.call('ZADD', key, -1, 'waiting')
end
if v == math.huge then
  return -1
end
return v - now -- >= 1: a live permit's whole ms
