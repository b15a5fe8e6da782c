-- lease_refresh: set a new expiry on a named lease in a hash field held by
-- the caller.
--
-- KEYS[1]  hash key (layout in lease_acquire.lua)
-- ARGV[1]  field
-- ARGV[2]  owner token of the caller
-- ARGV[3]  new TTL in milliseconds (integer >= 1)
--
-- Reply    1  the caller holds the field; it now expires ARGV[3] ms from
--             now (the value is not rewritten)
--          0  the field is gone, expired or held by another owner; nothing
--             changed
-- Errors (all raised before anything is written):
--   ERR unknown command  the server lacks hash-field expiration
--                        (ErrUnsupportedServer)
--   WRONGTYPE            the key is not a hash
--   COORD_BADSTATE       the hash has a key-level TTL
local key, field = KEYS[1], ARGV[1]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
if redis.call('PTTL', key) >= 0 then
  return redis.error_reply('COORD_BADSTATE the hash has a key-level TTL, which would end every lease in it (PERSIST it, or use another key)')
end
if redis.call('HGET', key, field) == ARGV[2] then
  redis.call('HPEXPIRE', key, ARGV[3], 'FIELDS', 1, field)
  return 1
end
return 0
