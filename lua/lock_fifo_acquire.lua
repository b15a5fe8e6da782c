-- lock_fifo_acquire: take an owner-token lock in first-in first-out order
-- (package lock's WithFIFO): only when it is free and no other live
-- waiter is queued before the caller. A blocked caller that is refused
-- joins the queue (fragment fifo_queue) and stays in it while it keeps
-- trying; the releases wake only the queue's head (lock_fifo_release).
--
-- KEYS[1]  lock key: a string holding the holder's owner token (no waiter
--          mark: a release always wakes the queue's head); it expires
-- KEYS[2]  the waiters' queue (a sorted set; see fragment fifo_queue), in
--          KEYS[1]'s Cluster slot
-- KEYS[3]  the waiters' alive times (a hash; see fragment fifo_queue), in
--          KEYS[1]'s Cluster slot
-- ARGV[1]  owner token of the caller (never ends with '+')
-- ARGV[2]  TTL in milliseconds (integer >= 1)
-- ARGV[3]  how long in ms a queued caller counts as alive after this
--          attempt (integer >= 1): it is removed from the queue once that
--          passes without another attempt (a waiter that died)
-- ARGV[4]  '1' when the caller waits after a refusal (it then joins the
--          queue), '0' when it does not (a TryAcquire: refused while any
--          live waiter is queued, and never queued)
--
-- Reply    'OK'     acquired (a string): the lock was free and the queue
--                   empty or headed by the caller, who leaves it; the new
--                   head, if any, is woken (it learns the holder's TTL).
--                   Also when the caller's own token is already there (a
--                   re-sent request): the TTL is set again, and the caller
--                   leaves the queue
--          pttl_ms  refused, and the caller (when queued) is the head: the
--                   holder's remaining TTL in ms (an integer >= 0), when
--                   trying again may succeed without a notification
--          -2       refused behind live waiters queued before the caller:
--                   only a notification (or a periodic re-check) tells
--                   when to try again. When the lock is free, the head is
--                   woken again (its notification may have been lost)
-- Errors   WRONGTYPE      a key holds a value of the wrong Redis type
--                         (nothing is written)
--          Tombstones in the lock key (abandoned acquisitions' tokens,
--          each followed by '!', lock_abandon; fragment lock_value) are a
--          free lock, except that when the caller's own is among them it
--          is refused (their remaining TTL, and the caller is not queued):
--          a late request of that acquisition.
--          So is a blocked caller whose token lock_fifo_abandon recorded
--          as abandoned among the alive times (ms left of the record,
--          not queued; an expired record is dropped).
--          COORD_BADSTATE the lock key holds a string that is not an
--                         owner token (22 bytes of base64url, or the 36
--                         bytes of lower-case hex and '-' of earlier
--                         versions, possibly followed by '+'), nor
--                         tombstones of them, or a token without a TTL
--                         (PERSISTed): nothing is written
--#include notify
--#include fifo_queue
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  fifo_leave(ARGV[1])
  return 'OK'
end
local pttl = 0
if v then
--#include lock_value.read
  if stone then
--#include stone_list.read
--#include lock_value.stones
    -- Tombstones of abandoned acquisitions (lock_abandon): the caller's
    -- own is refused (a late request of that acquisition; it does not
    -- join the queue), others are a free lock.
    if mine then
      return math.max(redis.call('PTTL', KEYS[1]), 0)
    end
    v = false
  end
end
if v then
  pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then
    return redis.error_reply('COORD_BADSTATE the lock key holds an owner token without a TTL')
  end
end
--#include time_ms
local head = fifo_head(now)
if not v and (not head or head == ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if head then
    fifo_leave(ARGV[1])
    local nxt = fifo_head(now)
    if nxt then
      wake(nxt)
    end
  end
  return 'OK'
end
if ARGV[4] == '1' then
  -- A record of this token's abandonment (lock_fifo_abandon, '!' and its
  -- end): a late attempt of an abandoned acquisition, not queued.
  local a = redis.call('HGET', KEYS[3], ARGV[1])
  if a and string.byte(a, 1) == 33 then
    local left = (tonumber(string.sub(a, 2)) or 0) - now
    if left > 0 then
      return left
    end
    redis.call('HDEL', KEYS[3], ARGV[1])
  end
  fifo_join(ARGV[1], now, tonumber(ARGV[3]))
  if not head then
    head = ARGV[1]
  end
end
if head and head ~= ARGV[1] then
  if not v then
    wake(head)
  end
  return -2
end
return pttl
