-- semaphore_release: give back a holder's permits and wake waiters.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  the holder's member, "P:<n>:<token>"
-- ARGV[2]  Pub/Sub channel on which waiters listen (a message is published
--          only when live permits were given back)
--
-- Reply    {1, now_ms}  released: the member was live and is removed;
--                       waiters were notified
--          {0, now_ms}  already gone: released before, or expired (an
--                       expired member is pruned); nothing else changed
--          Expired permits of other holders are pruned; the key is deleted
--          when no permit is left.
-- Errors   COORD_WRONGTYPE  the key is not a sorted set (nothing written)
local key = KEYS[1]
local member = ARGV[1]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)

local typ = redis.call('TYPE', key).ok
if typ == 'none' then
  return {0, now}
end
if typ ~= 'zset' then
  return redis.error_reply('COORD_WRONGTYPE semaphore key does not hold a sorted set')
end

local s = redis.call('ZSCORE', key, member)
local live = false
if s then
  local v = tonumber(s)
  live = v == nil or v > now -- nil: "inf" where tonumber cannot parse it
  redis.call('ZREM', key, member)
end
redis.call('ZREMRANGEBYSCORE', key, 0, nows)

if redis.call('ZCARD', key) <= 1 then
  -- Only the capacity record is left (or nothing).
  redis.call('DEL', key)
elseif redis.call('ZCOUNT', key, '+inf', '+inf') > 0 then
  redis.call('PERSIST', key)
else
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, top[2])
end

if live then
  redis.pcall('PUBLISH', ARGV[2], 'released')
  return {1, now}
end
return {0, now}
