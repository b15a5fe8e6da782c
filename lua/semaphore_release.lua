-- semaphore_release: give back a holder's permits and wake waiters.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  permit id: the holder's member, "P:<n>:<token>"
--
-- Reply    {1, now_ms}  released: the member was live and is removed;
--                       waiters are notified on the channel
--                       "coordination:" followed by KEYS[1] (best
--                       effort)
--          {0, now_ms}  already gone: released before, or expired (an
--                       expired member is pruned); nothing else changed
--          Expired permits of other holders are pruned; the key is deleted
--          when no permit is left. A permit belongs to its holder alone:
--          there is no "held by another owner" reply.
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a sorted set (raised by ZSCORE)
--   COORD_BADSTATE  the sorted set lacks a valid capacity record
local key = KEYS[1]
local member = ARGV[1]

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
  redis.call('ZREM', key, member)
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
  redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
  return {1, now}
end
return {0, now}
