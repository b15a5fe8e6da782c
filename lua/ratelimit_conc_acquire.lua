-- ratelimit_conc_acquire: take permits from a concurrency limiter, as one
-- expiring lease entry (the lease argument convention: id, TTL, extra).
--
-- KEYS[1]  state key: a sorted set. Lease members are "<permits>:<token>"
--          scored by their expiry in server milliseconds; the member "#"
--          scored -limit records the settings. The key expires with its
--          last lease, and is deleted when the last lease is released.
-- ARGV[1]  lease member "<permits>:<token>", the lease's id (ignored by a
--          probe; its permits must equal ARGV[4] otherwise)
-- ARGV[2]  lease duration (TTL) in milliseconds (integer >= 1)
-- ARGV[3]  limit: permits that may be held at once (integer >= 1)
-- ARGV[4]  permits requested (integer >= 0); 0 probes without taking
-- ARGV[5]  1: another limit recorded in the key is an error; 0: the key
--          takes this call's limit (a rolling deploy of a new limit)
--
-- Reply    {acquired, available, next_ms}
--          acquired   1 when the lease was recorded (probe: a permit is
--                     free); a re-sent call whose member is already live
--                     returns 1 again without a second entry. 0, nothing
--                     written, when the member's tombstone is live (its
--                     acquisition was abandoned: ratelimit_conc_abandon;
--                     a late request takes nothing)
--          available  permits free after this call
--          next_ms    when not acquired: milliseconds until the earliest
--                     live lease expires (a hint for waiters, not a retry
--                     time: leases are renewed), -1 when none or acquired
-- Writes   when a lease is taken: expired entries are removed, the
--          lease is added, the key's TTL covers the latest lease. Else
--          only an expiry on a key that has none (after PERSIST or
--          RESTORE): PEXPIRE NX until its latest lease expires, which
--          deletes a key without live leases.
-- Errors (raised before anything is written):
--   COORD_BADARG            an argument is out of range
--   WRONGTYPE               the key holds a non-sorted-set value (raised by
--                           ZSCORE)
--   COORD_CONFIG_MISMATCH   the key records another limit (ARGV[5] = 1)
--   COORD_BADSTATE          a member is malformed, or leases exist without
--                           the settings member
-- Tombstones: members "0:<permits>:<token>!" (ratelimit_conc_abandon) hold
-- 0 permits; every caller but the abandoned member ignores them, and a key
-- holding only tombstones (no settings member) reads as empty.
-- Idempotent: a re-send with the same member finds its live entry.
local lease, limit, permits = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not (limit and lease and permits) or limit < 1 or lease < 1 or permits < 0
    or limit % 1 ~= 0 or lease % 1 ~= 0 or permits % 1 ~= 0 or (ARGV[5] ~= '0' and ARGV[5] ~= '1') then
  return redis.error_reply('COORD_BADARG lease duration, limit and permits must be integers (>= 1, >= 1, >= 0), strict 0 or 1')
end
if permits > 0 and tonumber(string.match(ARGV[1], '^(%d+):')) ~= permits then
  return redis.error_reply('COORD_BADARG the lease member must start with the permits requested')
end
--#include time_ms
local s = redis.call('ZSCORE', KEYS[1], '#')
if s then
  if tonumber(s) ~= -limit and ARGV[5] == '1' then
    return redis.error_reply('COORD_CONFIG_MISMATCH key records another limit')
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  -- A set without its settings member is foreign, unless it holds only
  -- tombstones (a cleanup on a key without leases): then it is empty.
  for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if not string.match(m, '^0:.*!$') then
      return redis.error_reply('COORD_BADSTATE concurrency set lacks its settings member')
    end
  end
end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local used, first, last, mine, abandoned = 0, -1, now, false, false
for i = 1, #live, 2 do
  local m = live[i]
  local p = string.match(m, '^(%d+):')
  p = p and tonumber(p)
  if not p then
    return redis.error_reply('COORD_BADSTATE concurrency lease member is malformed')
  end
  used = used + p
  local e = tonumber(live[i + 1])
  if first < 0 and p > 0 then
    first = e - now
  end
  if e > last then
    last = e
  end
  if m == ARGV[1] then
    mine = true
  elseif p == 0 and string.sub(m, 3, -2) == ARGV[1] then
    abandoned = true -- this member's tombstone: a late request
  end
end
local available = limit - used
if available < 0 then
  available = 0
end
if s and (permits == 0 or mine or abandoned or permits > available) then
  -- nothing to write: a key without an expiry gets the one its leases call for
  redis.call('PEXPIRE', KEYS[1], last - now, 'NX')
end
if permits == 0 then
  if available > 0 then
    return {1, available, -1}
  end
  return {0, 0, first}
end
if mine then
  return {1, available, -1}
end
if permits > limit or abandoned then
  return {0, available, -1}
end
if permits > available then
  return {0, available, first}
end
local exp = now + lease
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now)
redis.call('ZADD', KEYS[1], exp, ARGV[1], -limit, '#')
if exp > last then
  last = exp
end
redis.call('PEXPIRE', KEYS[1], last - now)
return {1, available - permits, -1}
