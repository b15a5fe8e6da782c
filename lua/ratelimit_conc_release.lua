-- ratelimit_conc_release: return a concurrency lease's permits and wake
-- waiters.
--
-- KEYS[1]  state key (see ratelimit_conc_acquire)
-- ARGV[1]  lease member "<permits>:<token>" (the lease's id)
--
-- Reply    1  released: the entry was removed (the key is deleted when no
--             lease is left) and waiters were notified on the channel
--             "coordination:" followed by the key's name (best effort)
--          0  already gone (expired or released before); nothing changed
-- Errors   WRONGTYPE  the key holds a non-sorted-set value (raised by ZREM,
--                     nothing written)
-- Idempotent: a re-sent release finds nothing and returns 0.
local n = redis.call('ZREM', KEYS[1], ARGV[1])
if n == 0 then
  return 0
end
if redis.call('ZCARD', KEYS[1]) <= 1 then
  redis.call('DEL', KEYS[1])
end
redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
return 1
