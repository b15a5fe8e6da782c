-- lock_fifo_release: delete an owner-token lock of the first-in first-out
-- order (package lock's WithFIFO) held by the caller, remove the caller
-- from the waiters' queue (a blocked acquisition that gave up), and wake
-- the queue's head, alone, when the lock is then free.
--
-- KEYS[1]  lock key (see lock_fifo_acquire)
-- KEYS[2]  the waiters' queue (a sorted set; see fragment fifo_queue)
-- KEYS[3]  the waiters' alive times (a hash; see fragment fifo_queue)
-- ARGV[1]  owner token of the caller
--
-- Reply     1  released (deleted)
--           0  already gone (expired or released before); the caller
--              is no longer queued
--          -1  held by another owner; the caller is no longer queued
--          With 1 or 0, the live head of the queue (dead waiters before it
--          are removed) is woken: its owner token is the message published
--          on the lock key's channel (best effort: a channel the ACL
--          denies does not fail the release), and only the waiter with
--          that token acts on it. A release re-sent after a lost reply
--          gets 0 or -1 when its first send released: the engine, which
--          counted the two sends, reports what the first did (engine's
--          Handle.RunRelease).
-- Errors   WRONGTYPE  a key holds a value of the wrong Redis type
--#include notify
--#include fifo_queue
local v = redis.call('GET', KEYS[1])
local r = -1
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('DEL', KEYS[1])
  r = 1
elseif v == false then
  r = 0
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
