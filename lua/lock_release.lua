-- lock_release: delete an owner-token lock held by the caller and wake
-- waiters if any found it held.
--
-- KEYS[1]  lock key (the owner token, with a trailing '+' once a waiter
--          found it held; see lock_acquire)
-- ARGV[1]  owner token of the caller
-- KEYS[2]  (optional) the lock's release mark (engine.MarkKey): a string
--          holding the id of the last release of this lease key for 5 s
--
-- Reply     1  released (deleted); when the value carried the waiter mark
--              '+', waiters are notified on the channel
--              "coordination:" .. KEYS[1] (best effort: a channel the ACL
--              denies does not fail the release)
--              and the token is recorded in the mark (KEYS[2], when given)
--              for 5 s. A re-sent release whose first send released finds
--              its token in the mark and gets 1 again, changing nothing.
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
-- Errors   WRONGTYPE  the key holds a non-string value (nothing written)
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    redis.call('SET', KEYS[2], ARGV[1], 'PX', 5000)
  end
  if v ~= ARGV[1] then
    redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
  end
  return 1
end
if KEYS[2] and redis.call('GET', KEYS[2]) == ARGV[1] then
  return 1
end
if v == false then
  return 0
end
return -1
