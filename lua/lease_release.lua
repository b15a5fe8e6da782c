-- lease_release: delete a named lease in a hash field held by the caller
-- and wake the field's waiters.
--
-- KEYS[1]  hash key (layout in lease_acquire.lua)
-- ARGV[1]  field
-- ARGV[2]  owner token of the caller
--
-- Reply     1  released: the field is deleted (the hash with it when it
--              was the last field); waiters are notified on the channel
--              "coordination:" .. KEYS[1] .. "\0" .. field (best effort)
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
--          A release re-sent after a lost reply gets 0 or -1 when its
--          first send released: the engine reports what the first did
--          (engine's Handle.RunRelease); nothing is kept on the server.
-- Errors   ERR unknown command  the server lacks hash-field expiration
--                               (ErrUnsupportedServer); nothing written
--          WRONGTYPE            the key is not a hash; nothing written
--#include notify
local key, field = KEYS[1], ARGV[1]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
local v = redis.call('HGET', key, field)
if v ~= ARGV[2] then
  if not v then
    return 0
  end
  return -1
end
redis.call('HDEL', key, field)
wake('released', '\0' .. field)
return 1
