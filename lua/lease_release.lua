-- lease_release: delete a named lease in a hash field held by the caller
-- and wake the field's waiters.
--
-- KEYS[1]  hash key (layout in lease_acquire.lua)
-- KEYS[2]  (optional) the hash's release mark (engine.MarkKey): a hash
--          {field: owner token of the field's last release}, each field
--          expiring after 5 s
-- ARGV[1]  field
-- ARGV[2]  owner token of the caller
--
-- Reply     1  released: the field is deleted (the hash with it when it
--              was the last field); waiters are notified on the channel
--              "coordination:" .. KEYS[1] .. "\0" .. field (best effort);
--              the token is recorded in the mark's field for 5 s. A re-sent
--              release whose first send released finds it there and gets 1
--              again, changing nothing.
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
-- Errors   ERR unknown command  the server lacks hash-field expiration
--                               (ErrUnsupportedServer); nothing written
--          WRONGTYPE            the key is not a hash; nothing written
--#include notify
local key, field = KEYS[1], ARGV[1]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
local v = redis.call('HGET', key, field)
local mark = KEYS[2] and redis.call('HGET', KEYS[2], field) -- read first: WRONGTYPE before any write
if v ~= ARGV[2] then
  if mark == ARGV[2] then
    return 1
  end
  if not v then
    return 0
  end
  return -1
end
redis.call('HDEL', key, field)
if KEYS[2] then
  redis.call('HSET', KEYS[2], field, ARGV[2])
  redis.call('HPEXPIRE', KEYS[2], 5000, 'FIELDS', 1, field)
end
wake('released', '\0' .. field)
return 1
