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
--   member "waiting"         score -1: a blocked acquisition (or a drain)
--                            was refused since the last release that
--                            notified; absent otherwise. A release of a live
--                            permit publishes only while it is there, and
--                            removes it.
--   member "capacity-set"    score = -capacity, in place of "capacity": the
--                            capacity was set in the key
--                            (semaphore_configure: SetCapacity, Drain); it
--                            holds for every contender whatever capacity it
--                            passes (no COORD_CAPACITY_MISMATCH), and the
--                            key has no TTL and is never deleted by the
--                            scripts. Read only when "capacity" is missing
--                            (fragment semaphore_set), so a key without it
--                            costs nothing more.
--   member "draining"        score -1, with "capacity-set" only: nothing
--                            is granted (Drain, until Resume).
--   tombstones, the only members scored in (-1, 0):
--   member "P:<n>:<token>"   scored -(e / 2^43), e its expiry in server-time
--                            ms (at most two minutes from now): the tombstone semaphore_abandon leaves of an
--                            abandoned acquisition's permit id, in force
--                            until e. It is no permit: the permits in use,
--                            the holders and every verb but this one (for
--                            that id) leave it out, so it costs no
--                            capacity; this script refuses its own id while
--                            it is in force (a late request of the abandoned
--                            acquisition takes nothing) and prunes it once
--                            expired. The key lives at least until e (not
--                            deleted by a release while one is in force).
-- With "capacity", the key's TTL follows the latest permit expiry (none
-- while a permit without expiry is held), so an abandoned semaphore
-- disappears; the last release deletes it (unless a tombstone is in
-- force). Expired permits and tombstones are pruned by acquisitions. Every
-- script checks the records, the caller's member and each other score it
-- goes by against this layout before it writes anything (fragment
-- semaphore_state).
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
--                    live (a re-sent request), whatever the capacity now
--                    and even while draining: it is granted again, its
--                    expiry set from now (and the key's TTL extended to
--                    it), as a new permit's would be
--          retry_ms  the caller's own tombstone is in force: the ms until
--                    it expires (>= 1), nothing written; or
--                    fewer than n permits free under the capacity in
--                    force (ARGV[3], or "capacity-set"'s; none while
--                    draining) (an integer >= 1): the time until
--                    the earliest live permit expires; -1 when none of
--                    them expires or none is live. Expired permits are
--                    pruned (and expired tombstones); nothing else
--                    changes (besides the "waiting" record, see ARGV[4]).
--          -3        refused because the semaphore is draining (the
--                    "draining" record): no permit's expiry frees one,
--                    only Resume does (which notifies when the "waiting"
--                    record is there); pruned and marked as for retry_ms
-- Errors (all raised before anything is written):
--   WRONGTYPE                the key is not a sorted set
--   COORD_BADARG             ARGV[1] is not a member "P:<n>:<token>" with
--                            1 <= n <= ARGV[3]
--   COORD_BADSTATE           the sorted set lacks a valid capacity record
--                            ("capacity" or "capacity-set"),
--                            or a score the script goes by is outside the
--                            layout: a record's, the caller's member's, the
--                            earliest live permit's on a refusal (but
--                            while draining), the latest
--                            permit's when the key's TTL needs it
--                            (fragment semaphore_state)
--   COORD_CAPACITY_MISMATCH  a live permit exists and the "capacity"
--                            record differs from ARGV[3] (never with
--                            "capacity-set")
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
--#include semaphore_set
local fresh = not r[1]

--#include time_ms
local nows = string.format('%d', now)
local score = '+inf'
if ttl > 0 then
  score = string.format('%d', now + ttl)
end
local recorded, hadMulti, multi = nil, r[2] ~= false, false
if not fresh then
  -- A key in use: its records, the caller's member and every other score
  -- read below are checked before anything is written.
  local mine = r[4]
--#include semaphore_state
  if stone and stone > now then
    -- The caller's own tombstone (semaphore_abandon): a late request of
    -- an abandoned acquisition takes nothing.
    return stone - now
  end
  recorded = cap
  local used = redis.call('ZCOUNT', key, '(' .. nows, '+inf')
  local limit = want
  if fixed then
    -- The capacity set in the key wins over the caller's.
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
  -- The caller's own live permit (a re-sent request) is granted again,
  -- whatever the limit now: it was granted once.
  if (mine_at == nil or mine_at <= now) and used + n > limit then
    local v = -1
    if not draining then
      local first = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      if first[1] then
        v = expiry(first[2])
        if v == nil then
          return redis.error_reply(outside)
        end
      end
    end
    redis.call('ZREMRANGEBYSCORE', key, -now / 8796093022208, nows)
    if ARGV[4] == '1' and r[3] == false then
      redis.call('ZADD', key, -1, 'waiting')
    end
    if draining then
      return -3 -- no permit's expiry frees one: only Resume does
    end
    if v == -1 or v == math.huge then
      return -1
    end
    return v - now -- >= 1: a live permit's whole ms
  end
  if fixed then
    -- No TTL: the key holds the capacity set in it.
  elseif score == '+inf' then
    redis.call('PERSIST', key)
  else
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
  -- No live holder holds more than one permit any more.
  redis.call('ZREM', key, 'multi')
end
if fresh and score ~= '+inf' then
  redis.call('PEXPIREAT', key, score)
end
return 0
