-- semaphore_release: give back a holder's permits, and wake waiters if a
-- blocked acquisition was refused since the last release that did.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  permit id: the holder's member, "P:<n>:<token>"
--
-- Reply    1  released: the member was live and is removed; when the
--             "waiting" record is there, it is removed and waiters are
--             notified on the channel "coordination:" followed by KEYS[1]
--             (best effort)
--          0  already gone: released before, or expired (an expired member
--             is removed too); nothing else changed. A release re-sent
--             after a lost reply gets 0 when its first send released: the
--             engine reports what the first did (engine's
--             Handle.RunRelease); nothing is kept on the server.
--          A tombstone of the member (semaphore_abandon) gets 0 and stays.
--          The key's TTL follows the latest expiry left (a tombstone's
--          included); the key is deleted when no permit (and no tombstone)
--          is left. A key with a capacity set in it (the
--          "capacity-set" record) keeps no TTL and stays. A permit belongs
--          to its holder alone: there is no "held by another owner" reply.
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a sorted set
--   COORD_BADSTATE  the sorted set lacks a valid capacity record, or a
--                   score the script goes by is outside the layout: a
--                   record's or the caller's member's (when the member is
--                   there), the next permit's when the key expires with
--                   the caller's, and then the latest tombstone's unless
--                   that permit expires two minutes from now or later
--                   (fragment semaphore_state; a tombstone expiring over
--                   two minutes from now is outside too)
local key = KEYS[1]
local member = ARGV[1]

-- The records and the caller's member, in one call.
local r = redis.call('ZMSCORE', key, 'capacity', 'waiting', 'multi', member)
local mine = r[4]
if not mine then
  if not r[1] and redis.call('EXISTS', key) == 1 and
      redis.call('ZMSCORE', key, 'capacity-set')[1] == false then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  return 0
end
--#include semaphore_set

--#include time_ms
--#include semaphore_state
if stone then
  return 0 -- a tombstone (semaphore_abandon) is no permit: left as it is
end
local live = mine_at > now
local notify = live and r[2] ~= false
-- When the key expires with this permit (its only one without expiry, or
-- the one whose expiry is the key's; or the key lost its TTL by hand), it
-- will expire with the next one, or go when only records would be left.
-- A key with a capacity set in it has no TTL and stays.
local moves = false
if fixed then
  -- moves stays false
elseif mine_at == math.huge then
  moves = redis.call('ZCOUNT', key, '+inf', '+inf') == 1
else
  local at = redis.call('PEXPIRETIME', key)
  moves = at == mine_at or (at == -1 and redis.call('ZCOUNT', key, '+inf', '+inf') == 0)
end
local after, after_score = nil, nil
if moves then
  if redis.call('ZCARD', key) <= records + 1 then
    after = false
  else
--#include semaphore_expiry.next
  end
end
if after == false then
  redis.call('DEL', key)
else
  if notify then
    redis.call('ZREM', key, member, 'waiting')
  else
    redis.call('ZREM', key, member)
  end
  if after == math.huge then
    redis.call('PERSIST', key)
  elseif after then
    redis.call('PEXPIREAT', key, after_score)
  end
end
-- What the fragment released does, with notify's wake built only when it
-- is called (a function is a closure built on each run).
if notify then
--#include notify
  wake('released')
end
if live then
  return 1
end
return 0
