-- lock_abandon: the background cleanup of an ambiguous acquisition (its
-- reply was lost, so the caller cannot know whether it took the lock):
-- give the lock back if the abandoned token holds it, and leave in its
-- place a tombstone, the token followed by '!', so that the acquisition's
-- request, if it is still on its way (a retransmission, a stalled link)
-- and reaches the server after this cleanup, finds the key occupied and
-- takes nothing: its SET NX fails and lock_acquire refuses tombstones
-- among which is the caller's own token. Tombstones of several abandoned
-- acquisitions share the key (up to eight, fragments lock_value and
-- stone_list: the oldest is dropped for a ninth), so that each late
-- request is refused.
-- Any other acquirer takes tombstones over at once (lockcore.Try hands
-- them to lock_acquire, which overwrites them), so they block nobody.
-- Run only on that rare path, never by an acquisition. When another owner
-- holds the lock no tombstone fits: the engine runs this again until the
-- lock is free (engine.Engine.Abandon).
--
-- KEYS[1]  lock key (layout in lock_acquire)
-- ARGV[1]  the abandoned owner token (never ends with '+' or '!')
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1); the
--          key's remaining TTL when that is longer (the token's lock it
--          replaces, or others' tombstones it is added to), so that the
--          token cannot take the key again while its lock would have
--          lived (a Redlock node's refresh re-takes a free key:
--          redlock_refresh; redlock's ForceRelease passes 1)
--
-- Reply     1  the abandoned token held the lock: released, its
--              tombstone alone written; when the value carried the waiter
--              mark '+', waiters are notified as by lock_release
--           0  the lock was free (the tombstone is written), or held
--              tombstones only (the token's is added when not among them;
--              a re-send finds it there and changes nothing)
--          -1  held by another owner: nothing changed
-- Errors   WRONGTYPE       the key holds a non-string value (nothing
--                          written)
--          COORD_BADSTATE  the key holds a string that is neither an
--                          owner token (possibly marked '+') nor
--                          tombstones (nothing written)
--#include notify
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('SET', KEYS[1], ARGV[1] .. '!', 'PX',
    math.max(tonumber(ARGV[2]), redis.call('PTTL', KEYS[1])))
  if v ~= ARGV[1] then
    wake('released')
  end
  return 1
end
if v == false then
  redis.call('SET', KEYS[1], ARGV[1] .. '!', 'PX', ARGV[2])
  return 0
end
--#include lock_value.read
if stone then
--#include stone_list.read
--#include lock_value.stones
--#include stone_list.add
--#include lock_value.add
  return 0
end
return -1
