-- lock_fifo_abandon: the background cleanup of an ambiguous acquisition of
-- a first-in first-out lock (package lock's WithFIFO): as lock_abandon,
-- give the lock back if the abandoned token holds it and leave in its
-- place a tombstone, the token followed by '!', expiring after ARGV[2] ms,
-- which the acquisition's late request cannot pass (lock_fifo_acquire
-- refuses the caller's own tombstone, and treats another token's as a free
-- lock); and take the token out of the waiters' queue, as
-- lock_fifo_release does, waking the queue's head when the lock is free
-- for it. Run only on that rare path, never by an acquisition.
--
-- KEYS[1]  lock key (layout in lock_fifo_acquire)
-- KEYS[2]  the waiters' queue (fragment fifo_queue)
-- KEYS[3]  the waiters' alive times (fragment fifo_queue)
-- ARGV[1]  the abandoned owner token (never ends with '+' or '!')
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply     1  the abandoned token held the lock: released, tombstone
--              written, the queue's head woken
--           0  the lock was free (the tombstone is written), or already
--              this token's tombstone (a re-send: nothing else changed)
--          -1  held by another owner, or another token's tombstone: the
--              token only left the queue
-- Errors   WRONGTYPE  a key holds a value of the wrong Redis type
--#include notify
--#include fifo_queue
local v = redis.call('GET', KEYS[1])
local stone = ARGV[1] .. '!'
local r = -1
if v == ARGV[1] or v == ARGV[1] .. '+' then
  r = 1
elseif v == false or v == stone then
  r = 0
end
if r >= 0 and v ~= stone then
  redis.call('SET', KEYS[1], stone, 'PX', ARGV[2])
end
fifo_leave(ARGV[1])
if r >= 0 then
--#include time_ms
  local head = fifo_head(now)
  if head then
    wake(head)
  end
end
return r
