-- lease_verify: report whether the caller holds a named lease in a hash
-- field. Writes nothing.
--
-- KEYS[1]  hash key (layout in lease_acquire.lua)
-- ARGV[1]  field
-- ARGV[2]  owner token of the caller
--
-- Reply    1  held by the caller
--          0  gone, expired or held by another owner
-- Errors   ERR unknown command  the server lacks hash-field expiration
--                               (ErrUnsupportedServer)
--          WRONGTYPE            the key is not a hash
local key, field = KEYS[1], ARGV[1]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
if redis.call('HGET', key, field) == ARGV[2] then
  return 1
end
return 0
