-- lock_abandon: the background cleanup of an ambiguous acquisition (its
-- reply was lost, so the caller cannot know whether it took the lock):
-- give the lock back if the abandoned token holds it, and leave in its
-- place a tombstone, the token followed by '!', expiring after ARGV[2] ms,
-- so that the acquisition's request, if it is still on its way (a
-- retransmission, a stalled link) and reaches the server after this
-- cleanup, finds the key occupied and takes nothing: its SET NX fails and
-- lock_acquire refuses a tombstone of the caller's own token. Any other
-- acquirer takes a tombstone over at once (lockcore.Try hands it to
-- lock_acquire, which overwrites it), so a tombstone blocks nobody. Run
-- only on that rare path, never by an acquisition.
--
-- KEYS[1]  lock key (layout in lock_acquire)
-- ARGV[1]  the abandoned owner token (never ends with '+' or '!')
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply     1  the abandoned token held the lock: released, tombstone
--              written; when the value carried the waiter mark '+',
--              waiters are notified as by lock_release
--           0  the lock was free (the tombstone is written), or already
--              this token's tombstone (a re-send: nothing changed)
--          -1  held by another owner, or another token's tombstone:
--              nothing changed
-- Errors   WRONGTYPE  the key holds a non-string value (nothing written)
--#include notify
local v = redis.call('GET', KEYS[1])
local stone = ARGV[1] .. '!'
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('SET', KEYS[1], stone, 'PX', ARGV[2])
  if v ~= ARGV[1] then
    wake('released')
  end
  return 1
end
if v == false then
  redis.call('SET', KEYS[1], stone, 'PX', ARGV[2])
  return 0
end
if v == stone then
  return 0
end
return -1
