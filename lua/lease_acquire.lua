-- lease_acquire: take a named lease held in one field of a hash, if the
-- field is free. Needs hash-field expiration (Redis >= 7.4, Valkey >= 9.0).
--
-- Layout of the hash (one key, no hash tag needed): each field is one
-- named lease, its value the holder's owner token (22 characters), its
-- expiry the field's own (HPEXPIRE), in server time. Other fields are
-- other leases and are never touched. The hash has no key-level TTL (it
-- would end every lease in it at once). A release publishes on the channel
-- "coordination:" followed by KEYS[1], a NUL byte and the field.
--
-- KEYS[1]  hash key
-- ARGV[1]  field: the lease's name (any non-empty bytes)
-- ARGV[2]  owner token of the caller
-- ARGV[3]  TTL in milliseconds (integer >= 1)
--
-- Reply    {1, ttl_ms}   acquired: the field holds ARGV[2] and expires
--                        ARGV[3] ms from now; also when it holds the
--                        caller's token already (a re-sent request): its
--                        expiry is set again and nothing else changes
--                        Also when the field holds a tombstone list
--                        (left by lease_abandon: one to 8 entries, each
--                        an abandoned owner token followed by '!', e.g.
--                        'tokA!' or 'tokA!tokB!') without the caller's
--                        token: it is overwritten
--          {0, pttl_ms}  held by another owner; pttl_ms (>= 1) is the
--                        field's remaining TTL. Also for a tombstone list
--                        holding the caller's own token (its acquisition
--                        was abandoned: a late request takes nothing;
--                        nothing is written)
-- Errors (all raised before anything is written):
--   ERR unknown command (HPEXPIRETIME, the first command; worded
--                   differently by each server): the server lacks
--                   hash-field expiration; the client reports
--                   ErrUnsupportedServer
--   WRONGTYPE       the key is not a hash (raised by HPEXPIRETIME)
--   COORD_BADSTATE  the hash has a key-level TTL, or the field is held
--                   by another owner without a TTL (a field the library
--                   did not write: its holder would never leave), or
--                   the field holds a value ending with '!' that is not a
--                   tombstone list (an entry that is not an owner token:
--                   22 bytes of base64url, or the 36 bytes of lower-case
--                   hex and '-' of earlier versions; or more than 8)
local key, field, token = KEYS[1], ARGV[1], ARGV[2]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
if redis.call('PTTL', key) >= 0 then
  return redis.error_reply('COORD_BADSTATE the hash has a key-level TTL, which would end every lease in it (PERSIST it, or use another key)')
end
local v = redis.call('HGET', key, field)
if v == token then
  redis.call('HPEXPIRE', key, ARGV[3], 'FIELDS', 1, field)
  return {1, tonumber(ARGV[3])}
end
if v then
  if string.byte(v, -1) == 33 then -- '!': a tombstone list (lease_abandon)
--#include stone_list.read
    local n, mine = stones(v, token)
    if n == 0 then
      return redis.error_reply('COORD_BADSTATE the field holds a value ending with \'!\' that is not a tombstone list of owner tokens')
    end
    if not mine then
      -- Other tokens' only: free to take.
      redis.call('HSET', key, field, token)
      redis.call('HPEXPIRE', key, ARGV[3], 'FIELDS', 1, field)
      return {1, tonumber(ARGV[3])}
    end
    -- The caller's own is in it: its acquisition was abandoned (a late
    -- request).
  end
  local pttl = redis.call('HPTTL', key, 'FIELDS', 1, field)[1]
  if pttl == -1 then
    return redis.error_reply('COORD_BADSTATE the field has no TTL: its holder would never leave')
  end
  if pttl < 1 then
    -- The field expires this very millisecond: Redis 8 reports -2 while
    -- HGET still returns it. Retry in 1 ms.
    pttl = 1
  end
  return {0, pttl}
end
redis.call('HSET', key, field, token)
redis.call('HPEXPIRE', key, ARGV[3], 'FIELDS', 1, field)
return {1, tonumber(ARGV[3])}
