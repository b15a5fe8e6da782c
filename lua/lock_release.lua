-- lock_release: delete an owner-token lock held by the caller and wake
-- waiters if any found it held.
--
-- KEYS[1]  lock key (the owner token, with a trailing '+' once a waiter
--          found it held; see lock_acquire)
-- ARGV[1]  owner token of the caller
--
-- Reply     1  released (deleted); when the value carried the waiter mark
--              '+', waiters are notified on the channel
--              "coordination:" .. KEYS[1] (best effort: a channel the ACL
--              denies does not fail the release)
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
--          A release re-sent after a lost reply gets 0 or -1 when its
--          first send released: the engine, which counted the two sends,
--          reports what the first did (engine's Handle.RunRelease); nothing
--          is kept on the server.
-- Errors   WRONGTYPE  the key holds a non-string value (nothing written)
--#include notify
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('DEL', KEYS[1])
  if v ~= ARGV[1] then
    wake('released')
  end
  return 1
end
if v == false then
  return 0
end
return -1
