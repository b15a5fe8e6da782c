-- lock_release: delete an owner-token lock held by the caller and wake
-- waiters.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token of the caller
--
-- Reply     1  released (deleted; waiters notified on the channel
--              "coordination:" .. KEYS[1], best effort)
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
-- Errors   WRONGTYPE  the key holds a non-string value (nothing written)
local v = redis.call('GET', KEYS[1])
if v == false then
  return 0
end
if v ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
return 1
