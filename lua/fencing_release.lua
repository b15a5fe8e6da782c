-- fencing_release: delete a fencing-token lease held by the caller and wake
-- waiters. The counter key is never touched.
--
-- KEYS[1]  lease key (hash {owner, fence})
-- ARGV[1]  owner token of the caller
--
-- Reply     1  released (deleted; waiters notified on the channel
--              "coordination:" .. KEYS[1], best effort)
--           0  already gone; nothing changed
--          -1  held by another owner; nothing changed
-- Errors   WRONGTYPE  the lease key is not a hash (nothing written)
local o = redis.call('HGET', KEYS[1], 'owner')
if o == false then
  return 0
end
if o ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
return 1
