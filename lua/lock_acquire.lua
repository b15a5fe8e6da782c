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
--                    holds another token's tombstone (that token followed
--                    by '!', left by lock_abandon): it is overwritten
--          pttl_ms   held by another owner (an integer >= 0): its
--                    remaining TTL in ms; the value is marked with a
--                    trailing '+' so that its release notifies waiters.
--                    Also the remaining TTL of the caller's own tombstone
--                    (its acquisition was abandoned: a late request takes
--                    nothing), left unmarked
-- Errors   WRONGTYPE      the key holds a non-string value (raised by
--                         SET ... GET, which then writes nothing)
--          COORD_BADSTATE the key holds a string that is not an owner
--                         token (or a tombstone of one) (22 bytes of base64url, as
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
local last = string.byte(v, -1)
local marked = last == 43 -- 43 is '+'
local stone = last == 33 -- 33 is '!': a tombstone (lock_abandon)
local t = v
if marked or stone then
  t = string.sub(v, 1, -2)
end
local token = (#t == 22 and not string.find(t, '[^%w_%-]'))
  or (#t == 36 and string.match(t, '^[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+$')
    and string.byte(t, 9) == 45 and string.byte(t, 14) == 45 and string.byte(t, 19) == 45 and string.byte(t, 24) == 45)
if not token then
  return redis.error_reply('COORD_BADSTATE the lock key holds a value that is not an owner token')
end
if stone then
  if t == ARGV[1] then
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
