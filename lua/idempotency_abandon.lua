-- idempotency_abandon: delete a pending claim owned by the caller so that
-- the next Begin starts afresh, and wake waiters.
--
-- KEYS[1]  claim key (see idempotency_begin)
-- ARGV[1]  owner token the caller got from idempotency_begin
--
-- Reply    1  the caller's pending claim was deleted; waiters are notified
--             on the channel 'coordination:' .. KEYS[1] (best effort)
--          0  nothing changed: no claim (expired, or deleted before; a
--             re-sent request whose first run deleted the claim gets 0),
--             a claim of another owner, or a completed claim (a stored
--             result is never removed by Abandon)
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a hash (raised by
--                    HMGET)
--   COORD_BADSTATE   the hash lacks its state or owner field, or has an
--                    unknown state
local cur = redis.call('HMGET', KEYS[1], 'state', 'owner')
local state, owner = cur[1], cur[2]
if not state then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('COORD_BADSTATE idempotency hash lacks its state field')
  end
  return 0
end
if state ~= 'pending' and state ~= 'completed' then
  return redis.error_reply('COORD_BADSTATE idempotency hash has an unknown state')
end
if not owner then
  return redis.error_reply('COORD_BADSTATE idempotency hash lacks its owner field')
end
if state ~= 'pending' or owner ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'abandoned')
return 1
