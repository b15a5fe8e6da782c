-- lease_holder: report who holds a named lease in a hash field and for how
-- long (FieldSet.Holder reads it; FieldSet.Adopt compares the token).
-- Writes nothing. Needs hash-field expiration (Redis >= 7.4, Valkey >= 9.0).
--
-- KEYS[1]  hash key (layout in lease_acquire.lua)
-- ARGV[1]  field
--
-- Reply    false            free: the field does not exist, or holds a
--                           tombstone list (lease_abandon: one to 8
--                           abandoned owner tokens, each followed by '!')
--          {token, pttl_ms} token is the field's value (the holder's owner
--                           token; the client checks its shape, and a
--                           value ending with '!' that is not a tombstone
--                           list is returned as it is); pttl_ms
--                           is the field's remaining TTL in ms (>= 0: 0 in
--                           its last millisecond, read as free by the
--                           client), -1 when it has none (written by hand)
-- Errors   ERR unknown command  the server lacks hash-field expiration
--                               (ErrUnsupportedServer)
--          WRONGTYPE            the key is not a hash
--          COORD_BADSTATE       the hash has a key-level TTL (not a
--                               field-lease hash, as lease_acquire
--                               refuses it)
local key, field = KEYS[1], ARGV[1]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
if redis.call('PTTL', key) >= 0 then
  return redis.error_reply('COORD_BADSTATE the hash has a key-level TTL, which would end every lease in it (PERSIST it, or use another key)')
end
local v = redis.call('HGET', key, field)
if not v then
  return false
end
if string.byte(v, -1) == 33 then -- '!': a tombstone list (lease_abandon)
--#include stone_list.read
  if stones(v) > 0 then
    return false
  end
end
return {v, redis.call('HPTTL', key, 'FIELDS', 1, field)[1]}
