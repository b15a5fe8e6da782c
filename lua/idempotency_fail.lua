-- idempotency_fail: record that the work of a pending claim owned by the
-- caller failed in a way that is not safe to retry (it may have had
-- effects), so that retries are told so at once instead of waiting for a
-- claim nobody will finish, and wake waiters. The claim becomes
--   failed  'F' <fence> ':' <fail id> ':' <fp>
-- keeping the key's TTL (KEEPTTL): retries get "failed, outcome unknown"
-- until the key expires or is deleted (idempotency_forget), then the next
-- Begin claims it afresh. Layout of the other states in idempotency_begin.
--
-- KEYS[1]  claim key (layout in idempotency_begin)
-- ARGV[1]  owner token the caller got from idempotency_begin
-- ARGV[2]  fail id: random, fresh per Fail call, without ':'; recorded in
--          the failed claim so that a re-send of the same call is
--          recognised
--
-- Reply    1  the caller's pending claim is now failed; waiters are
--             notified on the channel 'coordination:' .. KEYS[1] (best
--             effort). A re-sent request (same fail id) whose first run
--             recorded the failure gets 1 again without any change.
--          0  nothing changed: no claim (expired, abandoned), a claim of
--             another owner, a completed claim or one failed by another
--             call
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a string (raised by
--                    GET)
--   COORD_BADSTATE   the string is not a claim (see idempotency_begin)
--#include notify
local v = redis.call('GET', KEYS[1])
if v == false then
  return 0
end
local state = string.byte(v, 1)
if state == 80 then -- 'P'
  local fence, owner, at = string.match(v, '^P[1-9]%d*:([1-9]%d*):([^:]+):()')
  if not owner then
    return redis.error_reply('COORD_BADSTATE idempotency claim lacks its owner, fence or a valid ttl')
  end
  if owner ~= ARGV[1] then
    return 0
  end
  redis.call('SET', KEYS[1], 'F' .. fence .. ':' .. ARGV[2] .. ':' .. string.sub(v, at), 'KEEPTTL')
  wake('failed')
  return 1
elseif state == 70 then -- 'F': failed; by this call when a re-send
  local id = string.match(v, '^F[1-9]%d*:([^:]+):')
  if not id then
    return redis.error_reply('COORD_BADSTATE failed idempotency claim lacks its fence or fail id')
  end
  if id == ARGV[2] then
    return 1
  end
  return 0
elseif state == 67 or state == 65 then -- 'C', 'A'
  return 0
end
return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
