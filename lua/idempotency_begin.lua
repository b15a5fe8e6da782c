-- idempotency_begin: claim an idempotency key, or report what already holds
-- it. A lookup never changes the key or its TTL.
--
-- KEYS[1]  claim key: a hash {state, owner, ttl, [fp], [result], [done]}
--          (see idempotency_complete for result and done); it always has a
--          TTL
-- ARGV[1]  owner token of the caller (fresh per Begin call, never empty)
-- ARGV[2]  pending TTL in milliseconds (integer >= 1): how long a new claim
--          lasts before another caller may take the key over
-- ARGV[3]  result TTL in milliseconds (integer >= 1), stored in field ttl;
--          idempotency_complete restarts the key's TTL with it
-- ARGV[4]  '1' when the caller gives a fingerprint, '0' when it gives none
-- ARGV[5]  the fingerprint, any bytes, possibly empty (ignored when ARGV[4]
--          is '0'). An absent fingerprint never matches a present one, even
--          an empty one.
--
-- Reply    {1}           started: a new pending claim owned by ARGV[1] with
--                        TTL ARGV[2]. A re-sent request whose first run
--                        created the claim finds its own token and gets {1}
--                        again without any change.
--          {2, result}   completed: the stored result bytes (may be empty)
--          {3, pttl_ms}  in progress: pending, owned by another token;
--                        pttl_ms is its remaining TTL (>= 0)
--          {4}           the key holds a claim with a different fingerprint
--                        (nothing about it is revealed)
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a hash (raised by
--                    HMGET)
--   COORD_BADSTATE   the hash lacks a field, has an unknown state or a bad
--                    ttl field (not a positive integer of at most 15
--                    digits), is completed without a result, or is a
--                    pending claim without a TTL
local cur = redis.call('HMGET', KEYS[1], 'state', 'owner', 'ttl', 'fp')
local state, owner, ttl, fp = cur[1], cur[2], cur[3], cur[4]
if not state then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('COORD_BADSTATE idempotency hash lacks its state field')
  end
  if ARGV[4] == '1' then
    redis.call('HSET', KEYS[1], 'state', 'pending', 'owner', ARGV[1], 'ttl', ARGV[3], 'fp', ARGV[5])
  else
    redis.call('HSET', KEYS[1], 'state', 'pending', 'owner', ARGV[1], 'ttl', ARGV[3])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
if state ~= 'pending' and state ~= 'completed' then
  return redis.error_reply('COORD_BADSTATE idempotency hash has an unknown state')
end
if not owner or not ttl or #ttl > 15 or not string.match(ttl, '^[1-9]%d*$') then
  return redis.error_reply('COORD_BADSTATE idempotency hash lacks its owner or a valid ttl field')
end
if state == 'pending' and owner == ARGV[1] then
  return {1}
end
if ARGV[4] == '1' then
  if fp ~= ARGV[5] then
    return {4}
  end
elseif fp then
  return {4}
end
if state == 'completed' then
  local result = redis.call('HGET', KEYS[1], 'result')
  if not result then
    return redis.error_reply('COORD_BADSTATE completed idempotency hash lacks its result')
  end
  return {2, result}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('COORD_BADSTATE pending idempotency claim has no TTL')
end
return {3, pttl}
