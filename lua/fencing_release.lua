-- fencing_release: delete a fencing-token lease held by the caller and wake
-- waiters if any found it held. The counter key is never touched.
--
-- KEYS[1]  lease key (hash {owner, fence[, holder]}; the owner token with a
--          trailing '+' once a contended attempt found it held: see
--          fencing_acquire)
-- ARGV[1]  owner token of the caller
--
-- Reply     1  released (deleted); when the owner carried the waiter mark
--              '+', waiters are notified on the channel
--              "coordination:" .. KEYS[1] (best effort: a channel the ACL
--              denies does not fail the release)
--           0  already gone; nothing changed
--          -1  held by another owner; nothing changed
--          A release re-sent after a lost reply gets 0 or -1 when its
--          first send released: the engine reports what the first did
--          (engine's Handle.RunRelease); nothing is kept on the server.
-- Errors   WRONGTYPE  the lease key is not a hash (nothing written)
--#include notify
local o = redis.call('HGET', KEYS[1], 'owner')
if o == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if o == false then
  return 0
end
if o == ARGV[1] .. '+' then
  redis.call('DEL', KEYS[1])
  wake('released')
  return 1
end
return -1
