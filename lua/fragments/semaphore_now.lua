-- fragment semaphore_now: the semaphore key's expiry and the server's
-- time, in sections. Uses key.
--#section at
-- semaphore_now.at: at is the key's expiry (PEXPIRETIME: ms; -1 for a key
-- without a TTL, -2 for no key).
local at = redis.call('PEXPIRETIME', key)
--#section clock
-- semaphore_now.clock: sets now (declared by the script) to the server's
-- time in integer ms: at minus the key's PTTL when the key has a TTL (two
-- integer replies of the clock that expires the key: cheaper than TIME's
-- pair of strings), else TIME's.
if at >= 0 then
  now = at - redis.call('PTTL', key)
else
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
