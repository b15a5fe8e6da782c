-- lock_acquire: take an owner-token lock if it is free.
--
-- KEYS[1]  lock key (a string holding the owner token; expires)
-- ARGV[1]  owner token of the caller
-- ARGV[2]  TTL in milliseconds (integer >= 1)
--
-- Reply    {1, ttl_ms}    acquired; also when the caller's own token is
--                         already there (a re-sent request): the TTL is set
--                         again and nothing else changes
--          {0, pttl_ms}   held by another owner; pttl_ms is its remaining
--                         TTL in ms (-1 when it has none)
-- Errors   WRONGTYPE      the key holds a non-string value (raised by GET
--                         before anything is written)
local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, tonumber(ARGV[2])}
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(ARGV[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
