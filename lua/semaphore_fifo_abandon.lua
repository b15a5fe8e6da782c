-- semaphore_fifo_abandon: the background cleanup of an ambiguous
-- acquisition of a first-in first-out semaphore (package semaphore's
-- WithFIFO): as semaphore_abandon (whose text this script copies), give
-- the permits back if the abandoned member holds them and leave its
-- tombstone, which the acquisition's late request cannot pass
-- (semaphore_fifo_acquire refuses the caller's own, and does not queue
-- it); and take the member out of the waiters' queue, waking the queue's
-- live head. Run only on that rare path, never by an acquisition.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- KEYS[2]  the waiters' queue (a sorted set; see fragment fifo_queue)
-- KEYS[3]  the waiters' alive times (a hash; see fragment fifo_queue)
-- ARGV[1]  the abandoned permit id: the member "P:<n>:<token>"
-- ARGV[2]  the tombstone's TTL in milliseconds (as semaphore_abandon's)
--
-- Reply    1  the member was live: released, tombstone written
--          0  the member was absent or expired (tombstone written), or
--             already a tombstone in force (a re-send); in every case the
--             member left the queue and the head was woken
-- Errors (raised before anything is written): as semaphore_abandon's;
--   WRONGTYPE when a queue key holds a value of the wrong type
--#include notify
--#include fifo_queue
local key = KEYS[1]
local member = ARGV[1]
local life = tonumber(ARGV[2])
local n = string.match(member, '^P:(%d+):.')
n = n and tonumber(n)
if n == nil or n < 1 or n > 9007199254740991 then
  return redis.error_reply('COORD_BADARG permit id is not P:<n>:<token> with 1 <= n <= 2^53-1')
end
if life == nil or life < 1 or life > 60000 or life % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG tombstone TTL is not an integer in 1..60000 ms')
end

local r = redis.call('ZMSCORE', key, 'capacity', 'waiting', 'multi', member)
--#include semaphore_set
--#include time_ms
local gone = now + life
local grave = string.format('%.17g', -gone / 8796093022208)
if not r[1] then
  redis.call('ZADD', key, -n, 'capacity', grave, member)
  redis.call('PEXPIREAT', key, string.format('%d', gone))
  fifo_leave(member)
  local head = fifo_head(now)
  if head then
    wake(head)
  end
  return 0
end
local mine = r[4]
--#include semaphore_state
if stone and stone > now then
  fifo_leave(member)
  return 0 -- a re-send: the tombstone is in force
end
local live = mine_at ~= nil and mine_at > now
local notify = live and r[2] ~= false
-- When the key expired with this permit (its only one without expiry, or
-- the one whose expiry is the key's; or the key lost its TTL by hand), it
-- expires with the next permit or tombstone, and not before the new
-- tombstone. A key with a capacity set in it has no TTL and stays.
local moves = false
if live and not fixed then
  if mine_at == math.huge then
    moves = redis.call('ZCOUNT', key, '+inf', '+inf') == 1
  else
    local at = redis.call('PEXPIRETIME', key)
    moves = at == mine_at or (at == -1 and redis.call('ZCOUNT', key, '+inf', '+inf') == 0)
  end
end
local after, after_score = nil, nil
if moves then
--#include semaphore_expiry.next
end
redis.call('ZADD', key, grave, member)
if notify then
  redis.call('ZREM', key, 'waiting')
end
if moves then
  if after == math.huge then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, string.format('%d', math.max(after or 0, gone)))
  end
elseif not fixed then
  -- The key lives at least as long as the tombstone (a key without a TTL
  -- keeps none: GT).
  redis.call('PEXPIREAT', key, string.format('%d', gone), 'GT')
end
--#include released
-- The caller leaves the queue (if queued), and the head is woken.
fifo_leave(member)
local head = fifo_head(now)
if head then
  wake(head)
end
if live then
  return 1
end
return 0
