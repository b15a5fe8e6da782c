-- lock_acquire: take an owner-token lock if it is free, for a blocked
-- waiter. (The first attempt of every acquisition is a plain
-- SET key token NX GET PX ttl instead: lockcore.Try.)
--
-- KEYS[1]  lock key: a string holding the holder's owner token, followed
--          by '+' once a waiter has found it held (the release then
--          notifies); it expires
-- ARGV[1]  owner token of the caller (never ends with '+')
-- ARGV[2]  TTL in milliseconds (integer >= 1)
--
-- Reply    'OK'      acquired (a string); also when the caller's own token
--                    is already there (a re-sent request): the TTL is set
--                    again and nothing else changes; also when the key
--                    holds tombstones without the caller's token (each an
--                    abandoned token followed by '!', left by
--                    lock_abandon; fragment lock_value): they are
--                    overwritten
--          pttl_ms   held by another owner (an integer >= 0): its
--                    remaining TTL in ms; the value is marked with a
--                    trailing '+' so that its release notifies waiters.
--                    Also the remaining TTL of tombstones among which is
--                    the caller's own (its acquisition was abandoned: a
--                    late request takes nothing), left unmarked
-- Errors   WRONGTYPE      the key holds a non-string value (raised by
--                         SET ... GET, which then writes nothing)
--          COORD_BADSTATE the key holds a string that is not an owner
--                         token (or tombstones of them) (22 bytes of base64url, as
--                         engine.NewToken makes them, or the 36 bytes of
--                         lower-case hex and '-' of earlier versions), or
--                         a token without a TTL (PERSISTed): nothing is
--                         written
-- One command takes a free lock or reads its holder (Redis 7.0+).
local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
if v == false then
  return 'OK'
end
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 'OK'
end
--#include lock_value.read
if stone then
--#include stone_list.read
--#include lock_value.stones
  -- Tombstones of abandoned acquisitions (lock_abandon): the caller's own
  -- is refused (a late request of that acquisition), others are free.
  if mine then
    return math.max(redis.call('PTTL', KEYS[1]), 0)
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 'OK'
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('COORD_BADSTATE the lock key holds an owner token without a TTL')
end
if not marked then
  redis.call('APPEND', KEYS[1], '+')
end
return pttl
