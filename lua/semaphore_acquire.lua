-- semaphore_acquire: take n permits of a counting semaphore if n are free.
--
-- Layout of the semaphore key (a sorted set; one key, no hash tag needed):
--   member "P:<n>:<token>"   one holder of n permits (the permit's id); score
--                            = its expiry in server-time ms (an integer no
--                            TTL puts past now + 9223372036855), or +inf
--                            for "until released"
--   records, the only members scored below 0 (read with ZMSCORE):
--   member "capacity"        score = -capacity (an integer, 1 <= capacity
--                            <= 2^53-1): the capacity every contender
--                            must use while any permit is live
--   member "multi"           score -1: a holder of more than one permit
--                            may be live; absent otherwise. Without it the
--                            permits in use are the live holders, counted
--                            in O(log N); with it, the live holders are
--                            read and their permits summed (and the record
--                            is dropped once none holds more than one).
--   member "waiting"         score -1: a blocked acquisition was refused
--                            since the last release that notified; absent
--                            otherwise. A release of a live permit publishes
--                            only while it is there, and removes it.
-- The key's TTL follows the latest permit expiry (none while a permit
-- without expiry is held), so an abandoned semaphore disappears; the last
-- release deletes it. Expired permits are pruned by acquisitions. Every
-- script checks the scores it relies on against this layout before it
-- writes anything (fragment semaphore_state).
--
-- KEYS[1]  semaphore key
-- ARGV[1]  permit id: the member "P:<n>:<token>", n the number of permits
--          to take (integer, 1 <= n <= ARGV[3]), token the holder's random
--          owner token
-- ARGV[2]  TTL in milliseconds (integer >= 1), or 0 for no expiry
-- ARGV[3]  capacity the caller uses (integer >= 1)
-- ARGV[4]  '1' when the caller waits after a refusal (the refusal then
--          adds the "waiting" record), '0' or absent when it does not
--
-- Reply    0         acquired; also when the caller's own member is already
--                    live (a re-sent request): its expiry is set again,
--                    nothing else changes
--          retry_ms  fewer than n permits free (an integer >= 1): the time
--                    until the earliest live permit expires; -1 when none of
--                    them expires. Expired permits are pruned; nothing else
--                    changes (besides the "waiting" record, see ARGV[4]).
-- Errors (all raised before anything is written):
--   WRONGTYPE                the key is not a sorted set
--   COORD_BADARG             ARGV[1] is not a member "P:<n>:<token>" with
--                            1 <= n <= ARGV[3]
--   COORD_BADSTATE           the sorted set lacks a valid capacity record,
--                            or holds a score outside the layout (see the
--                            fragment semaphore_state)
--   COORD_CAPACITY_MISMATCH  a live permit exists and the recorded capacity
--                            differs from ARGV[3]
local key = KEYS[1]
local member = ARGV[1]
local ttl = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local n = string.match(member, '^P:(%d+):.')
n = n and tonumber(n)
if n == nil or n < 1 or n > want then
  return redis.error_reply('COORD_BADARG permit id is not P:<n>:<token> with 1 <= n <= capacity')
end

-- The records and the caller's own member, in one call.
local r = redis.call('ZMSCORE', key, 'capacity', 'multi', 'waiting', member)
local multi, waiting, mine = r[2] ~= false, r[3] ~= false, r[4]
local hadMulti = multi
local fresh = not r[1]
if fresh and redis.call('EXISTS', key) == 1 then
  return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
end

--#include time_ms
--#include semaphore_state
--#include semaphore_expiry
local cap = nil
if not fresh then
  local bad
  cap, bad = checked(r, mine)
  if cap == nil then
    return bad
  end
end
local nows = string.format('%d', now)
local score = '+inf'
if ttl > 0 then
  score = string.format('%d', now + ttl)
end

local used = 0
if not fresh then
  used = redis.call('ZCOUNT', key, '(' .. nows, '+inf')
  if cap ~= want and used > 0 then
    return redis.error_reply(string.format(
      'COORD_CAPACITY_MISMATCH semaphore has capacity %d with live permits; the caller uses %d', cap, want))
  end
  if mine then
    if expiry(mine) > now then
      -- The caller's own live permit: a re-sent request.
      redis.call('ZADD', key, score, member)
      if score == '+inf' then
        redis.call('PERSIST', key)
      elseif redis.call('ZCOUNT', key, '+inf', '+inf') == 0 then
        expire_latest()
      end
      return 0
    end
  end
  redis.call('ZREMRANGEBYSCORE', key, 0, nows)
  if multi then
    -- A holder may hold several permits: sum the live holders' permits.
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
end

if used + n > want then
  if ARGV[4] == '1' and not waiting then
    redis.call('ZADD', key, -1, 'waiting')
  end
  local first = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local v = tonumber(first[2]) -- nil for "inf" where tonumber cannot parse it
  if v == nil or v == math.huge then
    return -1
  end
  return math.ceil(v - now) -- >= 1 for a live permit, whole ms or not
end

if cap ~= want then
  redis.call('ZADD', key, -want, 'capacity', score, member)
else
  redis.call('ZADD', key, score, member)
end
if n > 1 then
  if not hadMulti then
    redis.call('ZADD', key, -1, 'multi')
  end
elseif hadMulti and not multi then
  -- No live holder holds more than one permit any more.
  redis.call('ZREM', key, 'multi')
end
if score == '+inf' then
  redis.call('PERSIST', key)
elseif fresh then
  redis.call('PEXPIREAT', key, score)
else
  extend(score)
end
return 0
