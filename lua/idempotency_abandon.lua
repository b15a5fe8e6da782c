-- idempotency_abandon: end a pending claim owned by the caller so that
-- the next Begin starts afresh, and wake waiters. The claim becomes
-- 'A' <fence> ':' <abandon id> for 5 s (layout in idempotency_begin): a
-- free key that keeps the fence increasing and recognises a re-send.
--
-- KEYS[1]  claim key (layout in idempotency_begin)
-- ARGV[1]  owner token the caller got from idempotency_begin
-- ARGV[2]  abandon id: random, fresh per Abandon call, without ':';
--          recorded in the abandoned claim so that a re-send of the same
--          call is recognised
--
-- Reply    1  the caller's pending claim was abandoned; waiters are notified
--             on the channel 'coordination:' .. KEYS[1] (best effort). A
--             re-sent request (same abandon id) whose first run abandoned
--             the claim gets 1 again without any change (within the 5 s
--             the mark lasts).
--          0  nothing changed: no claim (expired, or abandoned before),
--             a claim of another owner, a completed claim (a stored
--             result is never removed by Abandon) or a failed one (its
--             outcome is unknown: only idempotency_forget removes it)
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
  local fence, owner = string.match(v, '^P[^:]*:([1-9]%d*):([^:]+):')
  if not owner then
    return redis.error_reply('COORD_BADSTATE idempotency claim lacks its fence or owner')
  end
  if owner ~= ARGV[1] then
    return 0
  end
  redis.call('SET', KEYS[1], 'A' .. fence .. ':' .. ARGV[2], 'PX', 5000)
  wake('abandoned')
  return 1
elseif state == 67 then -- 'C'
  if not string.match(v, '^C[^:]+:') then
    return redis.error_reply('COORD_BADSTATE completed idempotency claim lacks its completion id')
  end
  return 0
elseif state == 65 then -- 'A': abandoned; by this call when a re-send
  if string.match(v, '^A[^:]*:(.*)$') == ARGV[2] then
    return 1
  end
  return 0
elseif state == 70 then -- 'F': failed (kept: its outcome is unknown)
  return 0
end
return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
