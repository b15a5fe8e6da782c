-- semaphore_fifo_acquire: take n permits of a counting semaphore in
-- first-in first-out order (package semaphore's WithFIFO): only when n are
-- free and no other live waiter is queued before the caller. A blocked
-- caller that is refused joins the queue (fragment fifo_queue) and stays
-- in it while it keeps trying; the releases wake only the queue's head
-- (semaphore_fifo_release), so a waiter for many permits at the head is
-- not overtaken by smaller requests. Otherwise as semaphore_acquire,
-- whose layout, checks and grant this script shares (a copy: the default
-- order's script stays as it is); it never adds the "waiting" record.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- KEYS[2]  the waiters' queue (a sorted set; see fragment fifo_queue), in
--          KEYS[1]'s Cluster slot; its members are the waiters' permit ids
-- KEYS[3]  the waiters' alive times (a hash; see fragment fifo_queue), in
--          KEYS[1]'s Cluster slot
-- ARGV[1]  permit id: the member "P:<n>:<token>" (1 <= n <= ARGV[3])
-- ARGV[2]  TTL in milliseconds (integer >= 1), or 0 for no expiry
-- ARGV[3]  capacity the caller uses (integer >= 1)
-- ARGV[4]  how long in ms a queued caller counts as alive after this
--          attempt (integer >= 1): it is removed from the queue once that
--          passes without another attempt (a waiter that died)
-- ARGV[5]  '1' when the caller waits after a refusal (it then joins the
--          queue), '0' when it does not (a TryAcquire: refused while any
--          live waiter is queued, and never queued)
--
-- Reply    0         acquired: n permits were free under the capacity in
--                    force and the queue empty or headed by the caller, who
--                    leaves it; the new head, if any, is woken (its
--                    permit id is the message). Also when the caller's own
--                    member is already live (a re-sent request), as
--                    semaphore_acquire
--          retry_ms  refused, and the caller is the queue's head (or the
--                    queue is empty): as semaphore_acquire's refusal (the
--                    time until the earliest live permit expires, >= 1;
--                    -1 when none expires or none is live), or the time
--                    until the caller's own tombstone expires (a late
--                    request of an abandoned acquisition: not queued)
--          -3        refused because the semaphore is draining, whatever
--                    the queue (as semaphore_acquire's -3); queued as any
--                    refused waiter
--          -2        refused behind live waiters queued before the caller:
--                    only a notification (or a periodic re-check) tells
--                    when to try again. When the caller's n permits are
--                    free, the head is woken again (its notification may
--                    have been lost)
-- Errors (all raised before anything is written): as semaphore_acquire's,
--   and COORD_BADARG when ARGV[4] is not an integer >= 1; WRONGTYPE when
--   a queue key holds a value of the wrong type
--#include notify
--#include fifo_queue
local key = KEYS[1]
local member = ARGV[1]
local ttl = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local live = tonumber(ARGV[4])
local n = string.match(member, '^P:(%d+):.')
n = n and tonumber(n)
if n == nil or n < 1 or n > want then
  return redis.error_reply('COORD_BADARG permit id is not P:<n>:<token> with 1 <= n <= capacity')
end
if live == nil or live < 1 or live % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG alive time is not an integer >= 1')
end

-- The records and the caller's own member, in one call.
local r = redis.call('ZMSCORE', key, 'capacity', 'multi', 'waiting', member)
--#include semaphore_set
local fresh = not r[1]

--#include time_ms
local nows = string.format('%d', now)
local score = '+inf'
if ttl > 0 then
  score = string.format('%d', now + ttl)
end
local recorded, hadMulti, multi = nil, r[2] ~= false, false
local free, again, v = true, false, -1
local drained = false -- the "draining" record: nothing is granted
-- semaphore_state's expiry and outside, for the grant's
-- semaphore_expiry.extend (a key in use only)
local expiry_of, outside_of
if not fresh then
  -- A key in use: its records, the caller's member and every other score
  -- read below are checked before anything is written.
  local mine = r[4]
--#include semaphore_state
  expiry_of, outside_of = expiry, outside
  if stone and stone > now then
    -- The caller's own tombstone (semaphore_abandon): a late request of
    -- an abandoned acquisition takes nothing, and is not queued.
    return stone - now
  end
  recorded = cap
  local used = redis.call('ZCOUNT', key, '(' .. nows, '+inf')
  local limit = want
  if fixed then
    limit = cap
    if draining then
      limit = 0
    end
  elseif cap ~= want and used > 0 then
    return redis.error_reply(string.format(
      'COORD_CAPACITY_MISMATCH semaphore has capacity %d with live permits; the caller uses %d', cap, want))
  end
  multi = hadMulti
  if multi then
    local heavy = false
    if used > 0 then
      used = 0
      for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf')) do
        local w = string.match(m, '^P:(%d+):')
        w = w and tonumber(w) or 1
        used = used + w
        heavy = heavy or w > 1
      end
    end
    multi = heavy
  end
  free = used + n <= limit
  drained = draining
  -- The caller's own live permit (a re-sent request) is granted again.
  again = mine_at ~= nil and mine_at > now
  if not free and not again and not draining then
    -- Refused: the retry time, read (and checked) before anything is
    -- written (fifo_head may remove dead waiters).
    local first = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if first[1] then
      v = expiry(first[2])
      if v == nil then
        return redis.error_reply(outside)
      end
    end
  end
end

local head = fifo_head(now)
if again or (free and (not head or head == member)) then
  if not fresh then
    if fixed then
      -- No TTL: the key holds the capacity set in it.
    elseif score == '+inf' then
      redis.call('PERSIST', key)
    else
      local expiry, outside = expiry_of, outside_of
--#include semaphore_expiry.extend
    end
    -- Expired permits, [0, now], and expired tombstones, [-now / 2^43, 0).
    redis.call('ZREMRANGEBYSCORE', key, -now / 8796093022208, nows)
  end
  if recorded ~= want and not fixed then
    redis.call('ZADD', key, -want, 'capacity', score, member)
  else
    redis.call('ZADD', key, score, member)
  end
  if n > 1 then
    if not hadMulti then
      redis.call('ZADD', key, -1, 'multi')
    end
  elseif hadMulti and not multi then
    redis.call('ZREM', key, 'multi')
  end
  if fresh and score ~= '+inf' then
    redis.call('PEXPIREAT', key, score)
  end
  if head == member then
    fifo_leave(member)
    local nxt = fifo_head(now)
    if nxt then
      wake(nxt)
    end
  end
  return 0
end

-- Refused: too few permits free (v is the retry time), or free but behind
-- another waiter.
local behind = head and head ~= member
if not fresh then
  redis.call('ZREMRANGEBYSCORE', key, -now / 8796093022208, nows)
end
if ARGV[5] == '1' then
  fifo_join(member, now, live)
end
if drained then
  return -3 -- no permit's expiry frees one: only Resume does
end
if behind then
  if free then
    wake(head)
  end
  return -2
end
if v == -1 or v == math.huge then
  return -1
end
return v - now -- >= 1: a live permit's whole ms
