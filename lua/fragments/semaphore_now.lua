-- fragment semaphore_now: at is the semaphore key's expiry (PEXPIRETIME:
-- ms; -1 for a key without a TTL, -2 for no key) and now the server's
-- time in integer ms: at minus the key's PTTL when the key has a TTL (two
-- integer replies of one clock, the one that expires the key: cheaper
-- than TIME's pair of strings), else TIME's. Uses key.
local at = redis.call('PEXPIRETIME', key)
local now
if at >= 0 then
  now = at - redis.call('PTTL', key)
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
