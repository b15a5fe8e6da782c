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
--          A key left without an expiry (PERSIST, RESTORE) gets the one
--          its latest lease calls for (PEXPIREAT NX).
-- Errors   WRONGTYPE  the key holds a non-sorted-set value (raised by ZREM,
--                     nothing written)
-- Idempotent: a re-sent release finds nothing and returns 0.
--#include notify
local n = redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('ZCARD', KEYS[1]) <= 1 then
  if n == 1 then
    redis.call('DEL', KEYS[1])
  end
else
  -- The latest expiry, as an integer PEXPIREAT accepts even when a foreign
  -- member carries a score such as 1e+23 (corrupted state).
  local top = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
  if top and top > 0 then
    redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.min(top, 2^53)), 'NX')
  end
end
if n == 0 then
  return 0
end
wake('released')
return 1
