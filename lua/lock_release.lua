-- lock_release: delete an owner-token lock held by the caller and wake
-- waiters.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token of the caller
-- ARGV[2]  Pub/Sub channel on which waiters listen (a message is published
--          only when the lock was deleted)
--
-- Reply     1  released (deleted, waiters notified)
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
-- Errors   COORD_WRONGTYPE  the key holds a non-string value
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  return redis.error_reply('COORD_WRONGTYPE lock key does not hold a string')
end
if v == false then
  return 0
end
if v ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ARGV[2], 'released')
return 1
