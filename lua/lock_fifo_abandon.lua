-- lock_fifo_abandon: the background cleanup of an ambiguous acquisition of
-- a first-in first-out lock (package lock's WithFIFO): as lock_abandon,
-- give the lock back if the abandoned token holds it and leave in its
-- place a tombstone, the token followed by '!', expiring after ARGV[2] ms
-- (added to the tombstones already there, as lock_abandon does: fragments
-- lock_value and stone_list), which the acquisition's late request cannot
-- pass (lock_fifo_acquire refuses tombstones among which is the caller's own,
-- and treats others as a free lock); and take the token out of the waiters' queue, as
-- lock_fifo_release does, waking the queue's head when the lock is free
-- for it; and record the token among the alive times as abandoned (the
-- field the token, the value '!' and the server time in ms until which
-- the record holds, now + ARGV[2]), which lock_fifo_acquire reads before
-- it queues a blocked caller: a late attempt of the acquisition, reaching
-- the server while another owner holds the lock, does not join the queue
-- as a waiter that never tries again (which would hold up the waiters
-- behind it until its alive time passed). The record is dropped by that
-- token's next attempt or with the alive times' key, which expires once no
-- waiter is queued. Run only on that rare path, never by an acquisition.
--
-- KEYS[1]  lock key (layout in lock_fifo_acquire)
-- KEYS[2]  the waiters' queue (fragment fifo_queue)
-- KEYS[3]  the waiters' alive times (fragment fifo_queue)
-- ARGV[1]  the abandoned owner token (never ends with '+' or '!')
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply     1  the abandoned token held the lock: released, tombstone
--              written, the queue's head woken
--           0  the lock was free (the tombstone is written), or held
--              tombstones only (the token's added when not among them; a
--              re-send finds it there: only the record rewritten)
--          -1  held by another owner (the engine runs this again until the
--              lock is free: engine.Engine.Abandon): the
--              token left the queue and is recorded as abandoned
-- Errors   WRONGTYPE       a key holds a value of the wrong Redis type
--          COORD_BADSTATE  the lock key holds a string that is neither
--                          an owner token (possibly marked '+') nor
--                          tombstones (nothing written)
--#include notify
--#include fifo_queue
local v = redis.call('GET', KEYS[1])
local r = -1
if v == ARGV[1] or v == ARGV[1] .. '+' then
  r = 1
  redis.call('SET', KEYS[1], ARGV[1] .. '!', 'PX', ARGV[2])
elseif v == false then
  r = 0
  redis.call('SET', KEYS[1], ARGV[1] .. '!', 'PX', ARGV[2])
else
--#include lock_value.read
  if stone then
--#include stone_list.read
--#include lock_value.stones
    r = 0
--#include stone_list.add
--#include lock_value.add
  end
end
fifo_leave(ARGV[1])
--#include time_ms
local life = tonumber(ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], '!' .. (now + life))
if redis.call('PTTL', KEYS[3]) < life then
  redis.call('PEXPIRE', KEYS[3], life)
end
if r >= 0 then
  local head = fifo_head(now)
  if head then
    wake(head)
  end
end
return r
