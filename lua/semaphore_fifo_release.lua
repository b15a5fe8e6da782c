-- semaphore_fifo_release: give back a holder's permits of a first-in
-- first-out semaphore (package semaphore's WithFIFO), and wake the
-- waiters' queue's head, alone: as semaphore_release (whose text this
-- script copies: the default order's script stays as it is), then the
-- live head of the queue (dead waiters before it are removed) is woken
-- when permits were freed: its permit id is the message published on the
-- key's channel, and only the waiter with that id acts on it. A caller
-- that holds no permit (a queued waiter that gave up: the engine runs
-- this release for it) leaves the queue, and the head is woken.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- KEYS[2]  the waiters' queue (a sorted set; see fragment fifo_queue)
-- KEYS[3]  the waiters' alive times (a hash; see fragment fifo_queue)
-- ARGV[1]  permit id: the holder's (or the waiter's) member, "P:<n>:<token>"
--
-- Reply    1  released, as semaphore_release; the head is woken
--          0  already gone (as semaphore_release), or not a holder: the
--             caller left the queue, the head is woken
-- Errors (raised before anything is written): as semaphore_release's;
--   WRONGTYPE when a queue key holds a value of the wrong type
--#include notify
--#include fifo_queue
local key = KEYS[1]
local member = ARGV[1]

-- The records and the caller's member, in one call.
local r = redis.call('ZMSCORE', key, 'capacity', 'waiting', 'multi', member)
local mine = r[4]
if not mine then
  if not r[1] and redis.call('EXISTS', key) == 1 and
      redis.call('ZMSCORE', key, 'capacity-set')[1] == false then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  -- Not a holder: a queued waiter that gave up leaves the queue, and the
  -- head (maybe the next one) is woken.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  fifo_leave(member)
  local head = fifo_head(now)
  if head then
    wake(head)
  end
  return 0
end
--#include semaphore_set

--#include time_ms
--#include semaphore_state
if stone then
  return 0 -- a tombstone (semaphore_abandon) is no permit: left as it is
end
local live = mine_at > now
local notify = live and r[2] ~= false
-- When the key expires with this permit (its only one without expiry, or
-- the one whose expiry is the key's; or the key lost its TTL by hand), it
-- will expire with the next one, or go when only records would be left.
-- A key with a capacity set in it has no TTL and stays.
local moves = false
if fixed then
  -- moves stays false
elseif mine_at == math.huge then
  moves = redis.call('ZCOUNT', key, '+inf', '+inf') == 1
else
  local at = redis.call('PEXPIRETIME', key)
  moves = at == mine_at or (at == -1 and redis.call('ZCOUNT', key, '+inf', '+inf') == 0)
end
local after, after_score = nil, nil
if moves then
  if redis.call('ZCARD', key) <= records + 1 then
    after = false
  else
--#include semaphore_expiry.next
  end
end
if after == false then
  redis.call('DEL', key)
else
  if notify then
    redis.call('ZREM', key, member, 'waiting')
  else
    redis.call('ZREM', key, member)
  end
  if after == math.huge then
    redis.call('PERSIST', key)
  elseif after then
    redis.call('PEXPIREAT', key, after_score)
  end
end
--#include released
if live then
  -- Permits were freed: the queue's live head (dead waiters before it
  -- are removed) is woken, alone.
  local head = fifo_head(now)
  if head then
    wake(head)
  end
  return 1
end
return 0
