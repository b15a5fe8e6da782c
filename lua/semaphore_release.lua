-- semaphore_release: give back a holder's permits, and wake waiters if a
-- blocked acquisition was refused since the last release that did.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- KEYS[2]  (optional) the semaphore's release mark (engine.MarkKey): a
--          string holding the permit id of the key's last release for 5 s
-- ARGV[1]  permit id: the holder's member, "P:<n>:<token>"
--
-- Reply    1  released: the member was live and is removed; when the
--             "waiting" record is there, it is removed and waiters are
--             notified on the channel "coordination:" followed by KEYS[1]
--             (best effort); the permit id is recorded in the mark for 5 s.
--             A re-sent release whose first send released finds its id in
--             the mark and gets 1 again, changing nothing (unless another
--             holder of the key released in between: then 0).
--          0  already gone: released before, or expired (an expired member
--             is removed too); nothing else changed
--          The key's TTL follows the latest expiry left; the key is deleted
--          when no permit is left. A permit belongs to its holder alone:
--          there is no "held by another owner" reply.
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a sorted set
--   COORD_BADSTATE  the sorted set lacks a valid capacity record, or holds
--                   a score outside the layout (fragment semaphore_state)
local key = KEYS[1]
local member = ARGV[1]

-- The records and the caller's member, in one call.
local r = redis.call('ZMSCORE', key, 'capacity', 'waiting', 'multi', member)
local function gone()
  if KEYS[2] and redis.call('GET', KEYS[2]) == member then
    return 1
  end
  return 0
end
if not r[1] then
  if redis.call('EXISTS', key) == 1 then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  return gone()
end

--#include time_ms
--#include semaphore_state
--#include semaphore_expiry
local waiting = r[2] ~= false
local s = r[4]
local card = redis.call('ZCARD', key)
local c, records = checked(r, s, card)
if c == nil then
  return records
end
if not s then
  return gone()
end

local v = expiry(s)
local live = v > now
local forever = v == math.huge
local notify = live and waiting
if card <= records + 1 then
  -- The caller's member is the only permit: only records would be left.
  redis.call('DEL', key)
else
  if notify then
    redis.call('ZREM', key, member, 'waiting')
  else
    redis.call('ZREM', key, member)
  end
  if (forever and redis.call('ZCOUNT', key, '+inf', '+inf') == 0) or
      (not forever and redis.call('PEXPIRETIME', key) == v) then
    -- The key expired with this permit (the last one without expiry, or
    -- the latest expiry): it now expires with the latest permit left.
    expire_latest()
  end
end
if notify then
  redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
end
if live then
  if KEYS[2] then
    redis.call('SET', KEYS[2], member, 'PX', 5000)
  end
  return 1
end
return 0
