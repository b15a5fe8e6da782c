-- idempotency_begin: claim an idempotency key, or report what already holds
-- it. A lookup never changes the key or its TTL.
--
-- KEYS[1]  claim key: a string that always has a TTL, in one of three forms
--          (fp is the fingerprint part: '-:' for none, or its length in
--          decimal, ':' and its bytes):
--            pending    'P' <result ttl ms> ':' <fence> ':' <owner> ':' <fp>
--            completed  'C' <completion id> ':' <fp> <result bytes>
--            abandoned  'A' <fence> ':' <abandon id>  (for 5 s after an
--                       Abandon: a free key that remembers the last fence
--                       and the call that abandoned it)
--          (owner and completion id never contain ':'; fence is a positive
--          decimal)
-- ARGV[1]  owner token of the caller (fresh per Begin call, never empty,
--          without ':')
-- ARGV[2]  pending TTL in milliseconds (integer >= 1): how long a new claim
--          lasts before another caller may take the key over
-- ARGV[3]  the start of a new claim: 'P' <result ttl> ':', the result ttl
--          in milliseconds (integer >= 1, at most 15 digits;
--          idempotency_complete restarts the key's TTL with it)
-- ARGV[4]  the caller's fingerprint part: '-:' when it gives none, or the
--          fingerprint's length in decimal, ':' and its bytes (any bytes,
--          possibly none). An absent fingerprint never matches a present
--          one, even an empty one.
-- ARGV[5]  the middle of a new claim: ':' ARGV[1] ':' (the claim is ARGV[3] fence
--          ARGV[5] ARGV[4])
--
-- The fence of a new claim is the server's TIME in microseconds, or the
-- abandoned claim's fence + 1 when that is larger: strictly increasing per
-- key across claim lifetimes as long as the server clock does not step
-- back by more than a claim's lifetime (an expired claim leaves nothing
-- behind to compare with).
--
-- Reply    -fence    started (an integer <= -3): a new pending claim owned by
--                    ARGV[1] with TTL ARGV[2] and fencing token fence. A
--                    re-sent request whose first run created the claim finds
--                    its own token and gets the same -fence without any change.
--          result    completed (a string): the stored result bytes (may be
--                    empty)
--          pttl_ms   in progress (an integer >= 0): pending, owned by
--                    another token; its remaining TTL
--          -2        the key holds a claim with a different fingerprint
--                    (nothing about it is revealed)
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a string (raised
--                    by SET ... GET, which then writes nothing): a claim
--                    written by an earlier version of the library, which
--                    kept claims in hashes, is one
--   COORD_BADSTATE   the string is not a claim (unknown state, a bad ttl:
--                    not a positive integer of at most 15 digits, no owner,
--                    fence or completion id), or is a pending claim without
--                    a TTL
local t = redis.call('TIME')
local f = t[1] .. string.rep('0', 6 - #t[2]) .. t[2] -- microseconds, decimal
local claim = ARGV[3] .. f .. ARGV[5] .. ARGV[4]
-- One command creates the claim or reads what is there (Redis 7.0+).
local v = redis.call('SET', KEYS[1], claim, 'NX', 'GET', 'PX', ARGV[2])
if v == false then
  return -tonumber(f)
end
local fp = ARGV[4]
local state = string.byte(v, 1)
local ttl, owner, at
if state == 80 then -- 'P'
  local f
  ttl, f, owner, at = string.match(v, '^P([1-9]%d*):([1-9]%d*):([^:]+):()')
  if not ttl or #ttl > 15 or #f > 16 then
    return redis.error_reply('COORD_BADSTATE idempotency claim lacks its owner, fence or a valid ttl')
  end
  if owner == ARGV[1] then
    return -tonumber(f)
  end
elseif state == 67 then -- 'C'
  at = string.match(v, '^C[^:]+:()')
  if not at then
    return redis.error_reply('COORD_BADSTATE completed idempotency claim lacks its completion id')
  end
elseif state == 65 then -- 'A': abandoned, free; the new fence follows the old
  local a = string.match(v, '^A([1-9]%d*):')
  if not a or #a > 16 then
    return redis.error_reply('COORD_BADSTATE abandoned idempotency claim lacks its fence')
  end
  local fence = tonumber(f)
  local prev = tonumber(a)
  if prev >= fence then
    fence = prev + 1
    claim = ARGV[3] .. string.format('%d', fence) .. ARGV[5] .. ARGV[4]
  end
  redis.call('SET', KEYS[1], claim, 'PX', ARGV[2])
  return -fence
else
  return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
end
-- The fingerprint parts are prefix-free: equal fingerprints iff the stored
-- part starts with the caller's.
if string.sub(v, at, at + #fp - 1) ~= fp then
  return -2
end
if state == 67 then
  return string.sub(v, at + #fp)
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('COORD_BADSTATE pending idempotency claim has no TTL')
end
return pttl
