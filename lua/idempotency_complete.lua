-- idempotency_complete: store the result of a pending claim owned by the
-- caller, restart the key's TTL for the result, and wake waiters.
--
-- KEYS[1]  claim key (layout in idempotency_begin): a pending claim becomes
--          'C' <completion id> ':' <fp> <result bytes>, keeping its
--          fingerprint part
-- ARGV[1]  owner token the caller got from idempotency_begin
-- ARGV[2]  result bytes (any bytes, possibly empty)
-- ARGV[3]  completion id: random, fresh per Complete call, without ':';
--          recorded in the completed claim so that a re-send of the same
--          call is recognised
--
-- Reply    1  completed by this call: the result is stored, the key expires
--             after the result TTL recorded by idempotency_begin, and
--             waiters are notified on the channel 'coordination:' .. KEYS[1]
--             (best effort). A re-sent request (same completion id) whose
--             first run stored the result gets 1 again without any change.
--          0  nothing changed: no claim (or an abandoned or failed one), a claim of another owner (the
--             caller's expired and was taken over), or a claim completed
--             before by another Complete call
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a string (raised by
--                    GET; a claim of an earlier version is a hash)
--   COORD_BADSTATE   the string is not a claim (see idempotency_begin)
--#include notify
local v = redis.call('GET', KEYS[1])
if v == false then
  return 0
end
local state = string.byte(v, 1)
if state == 80 then -- 'P'
  local ttl, owner, at = string.match(v, '^P([1-9]%d*):[1-9]%d*:([^:]+):()')
  if not ttl or #ttl > 15 then
    return redis.error_reply('COORD_BADSTATE idempotency claim lacks its owner, fence or a valid ttl')
  end
  if owner ~= ARGV[1] then
    return 0
  end
  redis.call('SET', KEYS[1], 'C' .. ARGV[3] .. ':' .. string.sub(v, at) .. ARGV[2], 'PX', ttl)
  wake('completed')
  return 1
elseif state == 67 then -- 'C'
  local done = string.match(v, '^C([^:]+):')
  if not done then
    return redis.error_reply('COORD_BADSTATE completed idempotency claim lacks its completion id')
  end
  if done == ARGV[3] then
    return 1
  end
  return 0
elseif state == 65 or state == 70 then -- 'A': abandoned; 'F': failed
  return 0
end
return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
