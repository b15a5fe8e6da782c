-- fencing_abandon: the background cleanup of an ambiguous acquisition of a
-- fencing-token lock (its reply was lost, so the caller cannot know
-- whether it took the lease): give the lease back if the abandoned token
-- holds it, and leave in its place a tombstone, a hash whose only field is
-- owner = the token followed by '!', expiring after ARGV[2] ms, so that the
-- acquisition's request, if it is still on its way and reaches the server
-- after this cleanup, takes nothing: fencing_acquire refuses a tombstone of
-- the caller's own token without touching the counter or any TTL, and takes
-- over any other one as a free lease (drawing the next fencing token), so a
-- tombstone blocks nobody. The counter is never touched here. Run only on
-- that rare path, never by an acquisition.
--
-- KEYS[1]  lease key (layout in fencing_acquire.lua)
-- ARGV[1]  the abandoned owner token (never ends with '+' or '!')
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply     1  the abandoned token held the lease: released, tombstone
--              written; when the owner carried the waiter mark '+',
--              waiters are notified as by fencing_release
--           0  the lease was free (the tombstone is written), or already
--              this token's tombstone (a re-send: nothing changed)
--          -1  held by another owner, another token's tombstone, or a
--              hash without an owner field: nothing changed
-- Errors   WRONGTYPE  the lease key is not a hash (nothing written)
--#include notify
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
if o == stone then
  return 0
end
return -1
