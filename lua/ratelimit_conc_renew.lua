-- ratelimit_conc_renew: extend a live concurrency lease.
--
-- KEYS[1]  state key (see ratelimit_conc_acquire)
-- ARGV[1]  lease member "<permits>:<token>" (the lease's id)
-- ARGV[2]  lease duration (TTL) in milliseconds (integer >= 1)
--
-- Reply    1  renewed: the lease now expires lease_ms from now
--          0  the lease is gone (released or expired); an expired entry is
--             removed, nothing is recreated
-- Errors   COORD_BADARG
--          WRONGTYPE  the key holds a non-sorted-set value (raised by
--                     ZSCORE, nothing written)
-- Idempotent: a re-sent renewal sets the same expiry again.
local lease = tonumber(ARGV[2])
if not lease or lease < 1 or lease % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG lease duration must be an integer >= 1')
end
--#include time_ms
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then
  return 0
end
if tonumber(s) <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  if redis.call('ZCARD', KEYS[1]) <= 1 then
    redis.call('DEL', KEYS[1])
  end
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
