-- fencing_release: delete a fencing-token lease held by the caller and wake
-- waiters. The counter key is never touched.
--
-- KEYS[1]  lease key (hash {owner, fence})
-- ARGV[1]  owner token of the caller
-- KEYS[2]  (optional) the lease's release mark (engine.MarkKey): the
--          released lease key renamed, so the hash of the last release of
--          this lease, for the rest of its TTL or 5 s, whichever is shorter
--
-- Reply     1  released (deleted; waiters notified on the channel
--              "coordination:" .. KEYS[1], best effort; the key is renamed
--              to the mark when given)
--              A re-sent release whose first send released finds its id in
--              the mark (KEYS[2]) and gets 1 again, changing nothing.
--           0  already gone; nothing changed
--          -1  held by another owner; nothing changed
-- Errors   WRONGTYPE  the lease key is not a hash (nothing written)
--#include notify
local o = redis.call('HGET', KEYS[1], 'owner')
if o ~= ARGV[1] then
  if KEYS[2] and redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then
    return 1
  end
  if o == false then
    return 0
  end
  return -1
end
if KEYS[2] then
  redis.call('RENAME', KEYS[1], KEYS[2])
  -- The mark outlives the release by 5 s at most (engine.MarkTTL): a
  -- lease released long before its TTL leaves no long-lived key.
  redis.call('PEXPIRE', KEYS[2], 5000, 'LT')
else
  redis.call('DEL', KEYS[1])
end
wake('released')
return 1
