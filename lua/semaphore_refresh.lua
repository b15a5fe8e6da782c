-- semaphore_refresh: set a new expiry on a holder's live permits.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  permit id: the holder's member, "P:<n>:<token>"
-- ARGV[2]  new TTL in milliseconds from now (integer >= 1), or 0 for no
--          expiry
--
-- Reply    {1, now_ms}  the member was live; it now expires ARGV[2] ms
--                       after now_ms (or never)
--          {0, now_ms}  the member is gone or expired (an expired member is
--                       pruned, with every other expired permit); an
--                       expired holder never revives its permit
--          The key's TTL follows the latest expiry; the key is deleted when
--          no permit is left.
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a sorted set (raised by ZSCORE)
--   COORD_BADSTATE  the sorted set lacks a valid capacity record
local key = KEYS[1]
local member = ARGV[1]
local ttl = tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)

local c = redis.call('ZSCORE', key, 'capacity')
if not c then
  if redis.call('EXISTS', key) == 1 then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  return {0, now}
end
c = tonumber(c)
if c == nil or c >= 0 or c ~= math.floor(c) then
  return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
end

local s = redis.call('ZSCORE', key, member)
local live = false
if s then
  local v = tonumber(s)
  live = v == nil or v > now -- nil: "inf" where tonumber cannot parse it
end
if live then
  local score = '+inf'
  if ttl > 0 then
    score = string.format('%d', now + ttl)
  end
  redis.call('ZADD', key, 'XX', score, member)
end
redis.call('ZREMRANGEBYSCORE', key, 0, nows)

if redis.call('ZCARD', key) <= 1 then
  -- Only the capacity record is left.
  redis.call('DEL', key)
elseif redis.call('ZCOUNT', key, '+inf', '+inf') > 0 then
  redis.call('PERSIST', key)
else
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, top[2])
end

if live then
  return {1, now}
end
return {0, now}
