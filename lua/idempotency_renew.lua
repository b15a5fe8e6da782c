-- idempotency_renew: reset the TTL of a pending claim owned by the caller
-- (the keep-alive of Do and the middleware while the work runs).
--
-- KEYS[1]  claim key (layout in idempotency_begin)
-- ARGV[1]  owner token the caller got from idempotency_begin
-- ARGV[2]  the new pending TTL in milliseconds (integer >= 1)
--
-- Reply    1  renewed: the claim is the caller's and pending
--          0  nothing changed: no claim, another owner's, completed or
--             abandoned (a re-sent renewal of the caller's pending claim
--             gets 1 again: it only sets the TTL once more)
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a string
local v = redis.call('GET', KEYS[1])
if v == false or string.byte(v, 1) ~= 80 then
  return 0
end
local owner = string.match(v, '^P[^:]*:[^:]*:([^:]+):')
if owner ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
