-- lease_abandon: the background cleanup of an ambiguous acquisition of a
-- named lease in a hash field (its reply was lost, so the caller cannot
-- know whether it took the field): give the field back if the abandoned
-- token holds it, and leave in its place a tombstone list, so that the
-- acquisition's request, if it is still on its way and reaches the server
-- after this cleanup, takes nothing: lease_acquire refuses a tombstone list
-- that holds the caller's own token and takes over any other one, so a
-- tombstone blocks nobody. A tombstone list is the field's value: one to 8
-- entries, oldest first, each an abandoned owner token followed by '!'
-- ('tokA!', or 'tokA!tokB!' when two acquisitions were abandoned close
-- together), with a field TTL (HPEXPIRE); adding a ninth entry drops the
-- first (fragment stone_list, as every tombstone list). Run only on that
-- rare path, never by an acquisition. Needs hash-field expiration (Redis
-- >= 7.4, Valkey >= 9.0).
--
-- KEYS[1]  hash key (layout in lease_acquire.lua)
-- ARGV[1]  field
-- ARGV[2]  the abandoned owner token (never ends with '!')
-- ARGV[3]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply     1  the abandoned token held the field: released (the field's
--              waiters are notified as by lease_release); the field now
--              holds ARGV[2] .. '!' alone, expiring in ARGV[3] ms
--           0  the field was free: it now holds ARGV[2] .. '!', expiring
--              in ARGV[3] ms; or it held a tombstone list with ARGV[2]
--              in it (a re-send): nothing changed; or a tombstone list
--              without it: ARGV[2] .. '!' is appended (the first entry
--              dropped when there were 8), and the field expires in the
--              larger of its remaining TTL and ARGV[3] ms
--          -1  held by another owner: nothing changed
-- Errors (all raised before anything is written):
--   ERR unknown command  the server lacks hash-field expiration
--                        (HPEXPIRETIME, the first command)
--   WRONGTYPE            the key is not a hash
--   COORD_BADSTATE       the field holds a value ending with '!' that is
--                        not a tombstone list (an entry that is not an
--                        owner token, or more than 8)
--#include notify
--#include stone_list.read
--#include stone_list.add
local key, field = KEYS[1], ARGV[1]
redis.call('HPEXPIRETIME', key, 'FIELDS', 1, field)
local v = redis.call('HGET', key, field)
local stone = ARGV[2] .. '!'
local life = tonumber(ARGV[3])
if v and v ~= ARGV[2] then
  if string.byte(v, -1) ~= 33 then -- 33 is '!'
    return -1
  end
  local n, mine = stones(v, ARGV[2])
  if n == 0 then
    return redis.error_reply('COORD_BADSTATE the field holds a value ending with \'!\' that is not a tombstone list of owner tokens')
  end
  if mine then
    return 0
  end
  stone = stone_add(v, ARGV[2])
  life = math.max(life, redis.call('HPTTL', key, 'FIELDS', 1, field)[1])
end
redis.call('HSET', key, field, stone)
redis.call('HPEXPIRE', key, life, 'FIELDS', 1, field)
if v == ARGV[2] then
  wake('released', '\0' .. field)
  return 1
end
return 0
