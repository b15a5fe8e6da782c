-- ratelimit_conc_verify: report whether a concurrency lease is live.
-- Writes nothing.
--
-- KEYS[1]  state key (see ratelimit_conc_acquire)
-- ARGV[1]  lease member "<permits>:<token>" (the lease's id)
--
-- Reply    1  the lease's entry is live (its expiry is after now)
--          0  the lease is gone (released, or expired)
-- Errors   WRONGTYPE  the key holds a non-sorted-set value (raised by
--                     ZSCORE)
--#include time_ms
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) > now then
  return 1
end
return 0
