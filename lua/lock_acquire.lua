-- lock_acquire: take an owner-token lock if it is free, for a blocked
-- waiter. (The first attempt of every acquisition is a plain
-- SET key token NX GET PX ttl instead: engine.LockTry.)
--
-- KEYS[1]  lock key: a string holding the holder's owner token, followed
--          by '+' once a waiter has found it held (the release then
--          notifies); it expires
-- ARGV[1]  owner token of the caller (never ends with '+')
-- ARGV[2]  TTL in milliseconds (integer >= 1)
--
-- Reply    'OK'      acquired (a string); also when the caller's own token
--                    is already there (a re-sent request): the TTL is set
--                    again and nothing else changes
--          pttl_ms   held by another owner (an integer): its remaining TTL
--                    in ms (-1 when it has none); the value is marked with
--                    a trailing '+' so that its release notifies waiters
-- Errors   WRONGTYPE      the key holds a non-string value (raised by
--                         SET ... GET, which then writes nothing)
-- One command takes a free lock or reads its holder (Redis 7.0+).
local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
if v == false then
  return 'OK'
end
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 'OK'
end
if string.byte(v, -1) ~= 43 then -- 43 is '+'
  redis.call('APPEND', KEYS[1], '+')
end
return redis.call('PTTL', KEYS[1])
