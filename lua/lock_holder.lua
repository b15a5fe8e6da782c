-- lock_holder: report who holds an owner-token lock and for how long
-- (Mutex.Holder reads it; Mutex.Adopt compares the token). Writes nothing.
--
-- KEYS[1]  lock key (the owner token, with a trailing '+' once a waiter
--          found it held; see lock_acquire)
--
-- Reply    false            free (the key does not exist)
--          {value, pttl_ms} value is the key's value as stored (the
--                           holder's owner token, with the waiter mark
--                           '+' when a waiter found it held: the client
--                           strips it and checks the token's shape);
--                           pttl_ms is the key's remaining TTL in ms
--                           (>= 0: 0 in its last millisecond, which PTTL
--                           rounds down; the client reads 0 as free), -1
--                           when it has none (PERSISTed by hand)
--                           Tombstones (fragment lock_value) are returned
--                           as stored: the client reads them as free
-- Errors   WRONGTYPE       the key holds a non-string value
--          COORD_BADSTATE  the key holds a string that is neither an owner
--                          token (possibly marked '+') nor tombstones
local v = redis.call('GET', KEYS[1])
if not v then
  return false
end
--#include lock_value.read
if stone then
--#include stone_list.read
  if stones(v, '') == 0 then
    return redis.error_reply('COORD_BADSTATE the lock key holds a value that is not an owner token')
  end
end
return {v, redis.call('PTTL', KEYS[1])}
