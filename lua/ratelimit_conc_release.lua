-- ratelimit_conc_release: return a concurrency lease's permits and wake
-- waiters.
--
-- KEYS[1]  state key (see ratelimit_conc_acquire)
-- ARGV[1]  lease member "<permits>:<token>"
-- ARGV[2]  Pub/Sub channel of the key's waiters (a message is published only
--          when a lease was removed)
--
-- Reply    1  released: the entry was removed (the key is deleted when no
--             lease is left) and waiters were notified
--          0  already gone (expired or released before); nothing changed
-- Errors   COORD_WRONGTYPE (nothing written)
-- Idempotent: a re-sent release finds nothing and returns 0.
local n = redis.pcall('ZREM', KEYS[1], ARGV[1])
if type(n) == 'table' and n.err then
  return redis.error_reply('COORD_WRONGTYPE concurrency key does not hold a sorted set')
end
if n == 0 then
  return 0
end
if redis.call('ZCARD', KEYS[1]) <= 1 then
  redis.call('DEL', KEYS[1])
end
redis.pcall('PUBLISH', ARGV[2], 'released')
return 1
