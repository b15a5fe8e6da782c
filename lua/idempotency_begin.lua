-- idempotency_begin: claim an idempotency key, or report what already holds
-- it. A lookup never changes the key or its TTL.
--
-- KEYS[1]  claim key: a string that always has a TTL, in one of four forms
--          (fp is the fingerprint part: '-:' for none, or its length in
--          decimal, ':' and its bytes):
--            pending    'P' <result ttl ms> ':' <fence> ':' <owner> ':' <fp>
--            completed  'C' <completion id> ':' <fp> <result bytes>
--            abandoned  'A' <fence> ':' <abandon id>  (for 5 s after an
--                       Abandon: a free key that remembers the last fence
--                       and the call that abandoned it; the cleanup of an
--                       ambiguous Begin writes it with the Begin's owner
--                       token as the abandon id, for up to a minute)
--            failed     'F' <fence> ':' <fail id> ':' <fp>  (written by
--                       idempotency_fail: the work failed and may have had
--                       effects; kept with the pending claim's TTL)
--          (owner and completion id never contain ':'; fence is a positive
--          decimal)
-- ARGV[1]  pending TTL in milliseconds (integer >= 1): how long a new claim
--          lasts before another caller may take the key over
-- ARGV[2]  the end of a new claim: ':' <owner> ':' <fp>, owner the owner
--          token of the caller (fresh per Begin call, never empty, without
--          ':') and fp the caller's fingerprint part: '-:' when it gives
--          none, or the fingerprint's length in decimal, ':' and its bytes
--          (any bytes, possibly none). An absent fingerprint never matches a
--          present one, even an empty one.
-- ARGV[3]  (absent when the result TTL is ARGV[1]) the start of a new
--          claim: 'P' <result ttl> ':', the result ttl in milliseconds
--          (integer >= 1, at most 15 digits; idempotency_complete restarts
--          the key's TTL with it). A new claim is that start (or
--          'P' ARGV[1] ':'), its fence and ARGV[2].
--
-- The fence of a new claim is the server's TIME in microseconds, or the
-- abandoned claim's fence + 1 when that is larger: strictly increasing per
-- key across claim lifetimes as long as the server clock does not step
-- back by more than a claim's lifetime (an expired claim leaves nothing
-- behind to compare with).
--
-- Reply    'P...'    started (a string starting with 'P'): the caller's
--                    pending claim as stored, a new one owned by the owner of
--                    ARGV[2] with TTL ARGV[1] (its fencing token is between
--                    its first and second ':'). A re-sent request whose first
--                    run created the claim finds its own token and gets the
--                    same claim without any change.
--          'C...'    completed (a string starting with 'C'): the claim as
--                    stored; the result bytes (possibly none) follow its
--                    fingerprint part
--          pttl_ms   in progress (an integer >= 0): pending, owned by
--                    another token; its remaining TTL
--          'F' pttl  failed (a string starting with 'F', then the key's
--                    remaining TTL in ms, an integer >= 0): the work of the
--                    claim failed, its outcome unknown; not claimable until
--                    the key expires or is forgotten
--          -2        the key holds a claim with a different fingerprint
--                    (nothing about it is revealed)
--          An abandoned claim whose abandon id is the caller's owner token
--          (left by the cleanup of this very call, which was ambiguous:
--          idempotency_abandon with ARGV[3]) answers in progress with its
--          remaining TTL and nothing is written: a request reaching the
--          server after its call's cleanup creates no claim. Every other
--          caller takes an abandoned key over at once.
-- (The started and completed replies are the stored claim itself, so that a
-- new claim, the hot path, costs no number conversion: Go reads them.)
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
local us = t[2] -- microseconds within the second: 6 digits
if #us < 6 then
  us = string.rep('0', 6 - #us) .. us
end
local claim
if ARGV[3] then
  claim = ARGV[3] .. t[1] .. us .. ARGV[2]
else
  claim = 'P' .. ARGV[1] .. ':' .. t[1] .. us .. ARGV[2]
end
-- One command creates the claim or reads what is there (Redis 7.0+).
local v = redis.call('SET', KEYS[1], claim, 'NX', 'GET', 'PX', ARGV[1])
if v == false then
  return claim
end
local sep = string.find(ARGV[2], ':', 2, true)
local token, fp = string.sub(ARGV[2], 2, sep - 1), string.sub(ARGV[2], sep + 1)
local state = string.byte(v, 1)
local ttl, owner, at
if state == 80 then -- 'P'
  local f
  ttl, f, owner, at = string.match(v, '^P([1-9]%d*):([1-9]%d*):([^:]+):()')
  if not ttl or #ttl > 15 or #f > 16 then
    return redis.error_reply('COORD_BADSTATE idempotency claim lacks its owner, fence or a valid ttl')
  end
  if owner == token then
    return v
  end
elseif state == 67 then -- 'C'
  at = string.match(v, '^C[^:]+:()')
  if not at then
    return redis.error_reply('COORD_BADSTATE completed idempotency claim lacks its completion id')
  end
elseif state == 65 then -- 'A': abandoned, free; the new fence follows the old
  local a, id = string.match(v, '^A([1-9]%d*):()')
  if not a or #a > 16 then
    return redis.error_reply('COORD_BADSTATE abandoned idempotency claim lacks its fence')
  end
  if string.sub(v, id) == token then
    -- This call's own cleanup ran first: a late request takes nothing.
    return math.max(redis.call('PTTL', KEYS[1]), 0)
  end
  local fence = tonumber(t[1] .. us)
  local prev = tonumber(a)
  if prev >= fence then
    fence = prev + 1
    claim = (ARGV[3] or 'P' .. ARGV[1] .. ':') .. string.format('%d', fence) .. ARGV[2]
  end
  redis.call('SET', KEYS[1], claim, 'PX', ARGV[1])
  return claim
elseif state == 70 then -- 'F'
  at = string.match(v, '^F[1-9]%d*:[^:]+:()')
  if not at then
    return redis.error_reply('COORD_BADSTATE failed idempotency claim lacks its fence or fail id')
  end
else
  return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
end
-- The fingerprint parts are prefix-free: equal fingerprints iff the stored
-- part starts with the caller's.
if string.sub(v, at, at + #fp - 1) ~= fp then
  return -2
end
if state == 67 then
  return v
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('COORD_BADSTATE pending idempotency claim has no TTL')
end
if state == 70 then
  return 'F' .. pttl
end
return pttl
