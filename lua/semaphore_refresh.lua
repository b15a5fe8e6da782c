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
--          0  the member is gone or expired, or a tombstone
--             (semaphore_abandon; left as it is) (an expired member is removed:
--             an expired holder never revives its permit; the key is
--             deleted when no permit is left, unless a capacity was set
--             in it ("capacity-set"): such a key has no TTL and stays)
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a sorted set
--   COORD_BADSTATE  the sorted set lacks a valid capacity record, or a
--                   score the script goes by is outside the layout: a
--                   record's, the caller's member's, the next or the
--                   latest permit's (and the latest tombstone's, unless
--                   that permit expires two minutes from now or later)
--                   when the key's TTL follows it (fragment
--                   semaphore_state)
local key = KEYS[1]
local member = ARGV[1]
local ttl = tonumber(ARGV[2])

-- The records and the caller's member, in one call.
local r = redis.call('ZMSCORE', key, 'capacity', 'waiting', 'multi', member)
--#include semaphore_set
if not r[1] then
  return 0
end

--#include time_ms
local mine = r[4]
--#include semaphore_state
if not mine or stone then
  return 0 -- (a tombstone, semaphore_abandon, is no permit)
end

if mine_at ~= math.huge and mine_at <= now then
  -- Expired: remove it, never revive it.
  redis.call('ZREM', key, member)
  if not fixed and redis.call('ZCARD', key) <= records then
    redis.call('DEL', key)
  end
  return 0
end

-- The member's new score is the first write (ZADD, which a server out of
-- memory refuses as a script's first write: the renewal then fails,
-- nothing written); what the key's TTL needs is read before it.
if ttl == 0 then
  redis.call('ZADD', key, 'XX', '+inf', member)
  redis.call('PERSIST', key)
  return 1
end
local score = string.format('%d', now + ttl)
if fixed then
  -- A key with a capacity set in it has no TTL and stays.
  redis.call('ZADD', key, 'XX', score, member)
  return 1
end
local at = redis.call('PEXPIRETIME', key)
if (mine_at == math.huge and redis.call('ZCOUNT', key, '+inf', '+inf') == 1) or
    (mine_at ~= math.huge and ((at == mine_at and now + ttl < mine_at) or
      (at == -1 and redis.call('ZCOUNT', key, '+inf', '+inf') == 0))) then
  -- The key expires with this permit, now shortened (or given an expiry),
  -- or lost its TTL by hand: it expires with the later of this permit's
  -- new expiry and the highest other permit's.
  local after, after_score = nil, nil
--#include semaphore_expiry.next
  redis.call('ZADD', key, 'XX', score, member)
  if after == math.huge then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, string.format('%d', math.max(after or 0, now + ttl)))
  end
  return 1
end
redis.call('ZADD', key, 'XX', score, member)
if at ~= -1 and now + ttl > at then
  -- A key without a TTL holds a permit without expiry: it keeps none.
  redis.call('PEXPIREAT', key, score)
end
return 1
