-- fencing_release: delete a fencing-token lease held by the caller and wake
-- waiters. The counter key is never touched.
--
-- KEYS[1]  lease key (hash {owner, fence})
-- ARGV[1]  owner token of the caller
-- ARGV[2]  Pub/Sub channel on which waiters listen
--
-- Reply     1  released (deleted, waiters notified)
--           0  already gone; nothing changed
--          -1  held by another owner; nothing changed
-- Errors   COORD_WRONGTYPE  the lease key is not a hash
local o = redis.pcall('HGET', KEYS[1], 'owner')
if type(o) == 'table' and o.err then
  return redis.error_reply('COORD_WRONGTYPE lease key does not hold a hash')
end
if o == false then
  return 0
end
if o ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ARGV[2], 'released')
return 1
