-- lock_release: delete an owner-token lock held by the caller and wake
-- waiters if any found it held.
--
-- KEYS[1]  lock key (the owner token, with a trailing '+' once a waiter
--          found it held; see lock_acquire)
-- ARGV[1]  owner token of the caller
-- KEYS[2]  (optional) the lock's release mark (engine.MarkKey): the
--          released lock key renamed, so the value of the last release of
--          this lock, for the rest of its TTL or 5 s, whichever is shorter
--
-- Reply     1  released (deleted); when the value carried the waiter mark
--              '+', waiters are notified on the channel
--              "coordination:" .. KEYS[1] (best effort: a channel the ACL
--              denies does not fail the release)
--              and the key is renamed to the mark (KEYS[2], when given;
--              RENAME costs little more than DEL). A re-sent release whose first send released finds
--              its token in the mark and gets 1 again, changing nothing.
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
-- Errors   WRONGTYPE  the key holds a non-string value (nothing written)
--#include notify
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '+' then
  if KEYS[2] then
    redis.call('RENAME', KEYS[1], KEYS[2])
    -- The mark outlives the release by 5 s at most (engine.MarkTTL): a
    -- lease released long before its TTL leaves no long-lived key.
    redis.call('PEXPIRE', KEYS[2], 5000, 'LT')
  else
    redis.call('DEL', KEYS[1])
  end
  if v ~= ARGV[1] then
    wake('released')
  end
  return 1
end
if KEYS[2] then
  local m = redis.call('GET', KEYS[2])
  if m == ARGV[1] or m == ARGV[1] .. '+' then
    return 1
  end
end
if v == false then
  return 0
end
return -1
