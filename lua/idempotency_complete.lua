-- idempotency_complete: store the result of a pending claim owned by the
-- caller, restart the key's TTL for the result, and wake waiters.
--
-- KEYS[1]  claim key (see idempotency_begin); on completion it gains the
--          fields result (the bytes) and done (the completion id)
-- ARGV[1]  owner token the caller got from idempotency_begin
-- ARGV[2]  result bytes (any bytes, possibly empty)
-- ARGV[3]  completion id: random, fresh per Complete call; recorded in field
--          done so that a re-send of the same call is recognised
--
-- Reply    1  completed by this call: the result is stored, the key expires
--             after the result TTL recorded by idempotency_begin, and
--             waiters are notified on the channel 'coordination:' .. KEYS[1]
--             (best effort). A re-sent request (same owner token and
--             completion id) whose first run stored the result gets 1 again
--             without any change.
--          0  nothing changed: no claim, a claim of another owner (the
--             caller's expired and was taken over), or a claim completed
--             before by another Complete call
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a hash (raised by
--                    HMGET)
--   COORD_BADSTATE   the hash lacks a field, has an unknown state or a bad
--                    ttl field (not a positive integer of at most 15 digits)
local cur = redis.call('HMGET', KEYS[1], 'state', 'owner', 'ttl', 'done')
local state, owner, ttl, done = cur[1], cur[2], cur[3], cur[4]
if not state then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('COORD_BADSTATE idempotency hash lacks its state field')
  end
  return 0
end
if state ~= 'pending' and state ~= 'completed' then
  return redis.error_reply('COORD_BADSTATE idempotency hash has an unknown state')
end
if not owner or not ttl or #ttl > 15 or not string.match(ttl, '^[1-9]%d*$') then
  return redis.error_reply('COORD_BADSTATE idempotency hash lacks its owner or a valid ttl field')
end
if owner ~= ARGV[1] then
  return 0
end
if state == 'completed' then
  if done == ARGV[3] then
    return 1
  end
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'completed', 'result', ARGV[2], 'done', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'completed')
return 1
