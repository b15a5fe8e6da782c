-- lease_abandon: the background cleanup of an ambiguous acquisition of a
-- named lease in a hash field (its reply was lost, so the caller cannot
-- know whether it took the field): give the field back if the abandoned
-- token holds it, and leave in its place a tombstone, the token followed
-- by '!', expiring (HPEXPIRE) after ARGV[3] ms, so that the acquisition's
-- request, if it is still on its way and reaches the server after this
-- cleanup, takes nothing: lease_acquire refuses a tombstone of the
-- caller's own token and takes over any other one, so a tombstone blocks
-- nobody. Run only on that rare path, never by an acquisition. Needs
-- hash-field expiration (Redis >= 7.4, Valkey >= 9.0).
--
-- KEYS[1]  hash key (layout in lease_acquire.lua)
-- ARGV[1]  field
-- ARGV[2]  the abandoned owner token (never ends with '!')
-- ARGV[3]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply     1  the abandoned token held the field: released (the field's
--              waiters are notified as by lease_release), tombstone written
--           0  the field was free (the tombstone is written), or already
--              this token's tombstone (a re-send: nothing changed)
--          -1  held by another owner, or another token's tombstone:
--              nothing changed
-- Errors   ERR unknown command  the server lacks hash-field expiration
--                               (HPEXPIRETIME, the first command)
--          WRONGTYPE            the key is not a hash (nothing written)
--#include notify
local key, field = KEYS[1], ARGV[1]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
local v = redis.call('HGET', key, field)
local stone = ARGV[2] .. '!'
if v == stone then
  return 0
end
if v and v ~= ARGV[2] then
  return -1
end
redis.call('HSET', key, field, stone)
redis.call('HPEXPIRE', key, ARGV[3], 'FIELDS', 1, field)
if v then
  wake('released', '\0' .. field)
  return 1
end
return 0
