-- fencing_abandon: the background cleanup of an ambiguous acquisition of a
-- fencing-token lock (its reply was lost, so the caller cannot know
-- whether it took the lease): give the lease back if the abandoned token
-- holds it, and leave in its place a tombstone, a hash whose only field is
-- owner = a tombstone list, with a key TTL, so that the acquisition's
-- request, if it is still on its way and reaches the server after this
-- cleanup, takes nothing: fencing_acquire refuses a tombstone list that
-- holds the caller's own token without touching the counter or any TTL,
-- and takes over any other one as a free lease (drawing the next fencing
-- token), so a tombstone blocks nobody. A tombstone list is one to 8
-- entries, oldest first, each an abandoned owner token followed by '!'
-- ('tokA!', or 'tokA!tokB!' when two acquisitions were abandoned close
-- together); adding a ninth entry drops the first (fragment stone_list,
-- as every tombstone list). The counter is never touched here. Run only
-- on that rare path, never by an acquisition.
--
-- KEYS[1]  lease key (layout in fencing_acquire.lua)
-- ARGV[1]  the abandoned owner token (never ends with '+' or '!')
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply     1  the abandoned token held the lease: released; the key is
--              now {owner: ARGV[1] .. '!'}, expiring in ARGV[2] ms; when
--              the owner carried the waiter mark '+', waiters are
--              notified as by fencing_release
--           0  the lease was free: the key is now {owner: ARGV[1] ..
--              '!'}, expiring in ARGV[2] ms; or it held a tombstone list
--              with ARGV[1] in it (a re-send): nothing changed; or a
--              tombstone list without it: ARGV[1] .. '!' is appended (the
--              first entry dropped when there were 8), and the key
--              expires in the larger of its remaining TTL and ARGV[2] ms
--          -1  held by another owner, or a hash without an owner field:
--              nothing changed
-- Errors (all raised before anything is written):
--   WRONGTYPE       the lease key is not a hash
--   COORD_BADSTATE  the owner field ends with '!' but the hash is not a
--                   tombstone (other fields beside owner, or not a
--                   tombstone list: an entry that is not an owner token,
--                   or more than 8)
--#include notify
--#include stone_list.read
--#include stone_list.add
local o = redis.call('HGET', KEYS[1], 'owner')
local stone = ARGV[1] .. '!'
if o == ARGV[1] or o == ARGV[1] .. '+' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'owner', stone)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if o ~= ARGV[1] then
    wake('released')
  end
  return 1
end
if o == false then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return -1
  end
  redis.call('HSET', KEYS[1], 'owner', stone)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
if string.byte(o, -1) ~= 33 then -- 33 is '!'
  return -1
end
local n, mine = 0, false
if redis.call('HLEN', KEYS[1]) == 1 then
  n, mine = stones(o, ARGV[1])
end
if n == 0 then
  return redis.error_reply('COORD_BADSTATE the lease hash holds an owner ending with \'!\' that is not a tombstone list of owner tokens alone')
end
if mine then
  return 0
end
local life = math.max(tonumber(ARGV[2]), redis.call('PTTL', KEYS[1]))
redis.call('HSET', KEYS[1], 'owner', stone_add(o, ARGV[1]))
redis.call('PEXPIRE', KEYS[1], life)
return 0
