-- ratelimit_conc_abandon: the background cleanup of an ambiguous
-- concurrency lease acquisition (its reply was lost, so the caller cannot
-- know whether it took the permits): return the lease's permits if its
-- entry is there, and leave in the set a tombstone, the member
-- "0:" .. ARGV[1] .. "!" scored with its expiry (ARGV[2] ms from now), so
-- that the acquisition's request, if it is still on its way (a
-- retransmission, a stalled link) and reaches the server after this
-- cleanup, takes nothing: ratelimit_conc_acquire refuses a member whose
-- tombstone is live. A tombstone holds 0 permits (its member parses as
-- "<permits>:<token>" with 0 permits), so it costs other callers nothing;
-- the next grant's pruning removes it once expired. Run only on that rare
-- path, never by an acquisition.
--
-- KEYS[1]  state key (see ratelimit_conc_acquire)
-- ARGV[1]  the abandoned lease member "<permits>:<token>" (the lease's id)
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply    1  the abandoned entry was there: removed, waiters notified as
--             by ratelimit_conc_release, tombstone written
--          0  no such entry (the request has not arrived, or the entry
--             expired): the tombstone is written (again: a re-sent
--             cleanup moves its expiry, nothing else)
-- Writes   the key's TTL is raised to cover the tombstone when it is
--          shorter; a key without one (PERSIST, RESTORE) keeps none, as
--          ratelimit_conc_acquire leaves it (an expired tombstone is read
--          as absent). A key that did not exist holds the tombstone alone
--          (no settings member: ratelimit_conc_acquire reads it as empty).
-- Errors   COORD_BADARG  ARGV[2] is not an integer >= 1 (nothing written)
--          WRONGTYPE     the key holds a non-sorted-set value (raised by
--                        ZREM, nothing written)
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 or ttl % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG the tombstone TTL must be an integer >= 1')
end
--#include notify
--#include time_ms
local n = redis.call('ZREM', KEYS[1], ARGV[1])
local pttl = redis.call('PTTL', KEYS[1]) -- -2: no key left, -1: no expiry
redis.call('ZADD', KEYS[1], now + ttl, '0:' .. ARGV[1] .. '!')
if pttl == -2 or (pttl >= 0 and pttl < ttl) then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if n == 0 then
  return 0
end
wake('released')
return 1
