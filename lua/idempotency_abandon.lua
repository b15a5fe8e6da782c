-- idempotency_abandon: delete a pending claim owned by the caller so that
-- the next Begin starts afresh, and wake waiters.
--
-- KEYS[1]  claim key (layout in idempotency_begin)
-- ARGV[1]  owner token the caller got from idempotency_begin
--
-- Reply    1  the caller's pending claim was deleted; waiters are notified
--             on the channel 'coordination:' .. KEYS[1] (best effort)
--          0  nothing changed: no claim (expired, or deleted before; a
--             re-sent request whose first run deleted the claim gets 0),
--             a claim of another owner, or a completed claim (a stored
--             result is never removed by Abandon)
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a string (raised by
--                    GET; a claim of an earlier version is a hash)
--   COORD_BADSTATE   the string is not a claim (see idempotency_begin)
local v = redis.call('GET', KEYS[1])
if v == false then
  return 0
end
local state = string.byte(v, 1)
if state == 80 then -- 'P'
  local owner = string.match(v, '^P[^:]*:([^:]+):')
  if not owner then
    return redis.error_reply('COORD_BADSTATE idempotency claim lacks its owner')
  end
  if owner ~= ARGV[1] then
    return 0
  end
  redis.call('DEL', KEYS[1])
  redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'abandoned')
  return 1
elseif state == 67 then -- 'C'
  if not string.match(v, '^C[^:]+:') then
    return redis.error_reply('COORD_BADSTATE completed idempotency claim lacks its completion id')
  end
  return 0
end
return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
