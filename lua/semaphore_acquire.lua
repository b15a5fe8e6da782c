-- semaphore_acquire: take n permits of a counting semaphore if n are free.
--
-- Layout of the semaphore key (a sorted set; one key, no hash tag needed):
--   member "capacity"        score = -capacity (negative, so it never falls in
--                            an expiry range): the capacity every contender
--                            must use while any permit is live
--   member "P:<n>:<token>"   one holder of n permits (the permit's id); score
--                            = its expiry in server-time ms, or +inf for
--                            "until released"
-- The key's own TTL is set to the latest permit expiry (none while a
-- permit without expiry is held), so an abandoned semaphore disappears.
--
-- KEYS[1]  semaphore key
-- ARGV[1]  permit id: the member "P:<n>:<token>", n the number of permits
--          to take (integer, 1 <= n <= ARGV[3]), token the holder's random
--          owner token
-- ARGV[2]  TTL in milliseconds (integer >= 1), or 0 for no expiry
-- ARGV[3]  capacity the caller uses (integer >= 1)
--
-- Reply    {1, 0, now_ms}        acquired; also when the caller's own member
--                                is already live (a re-sent request): its
--                                expiry is set again, nothing else changes
--          {0, retry_ms, now_ms} fewer than n permits free; retry_ms is the
--                                time until the earliest live permit expires
--                                (-1 when none of them expires). Expired
--                                permits are pruned.
--          now_ms is the server time the script ran at.
-- Errors (all raised before anything is written):
--   WRONGTYPE                the key is not a sorted set (raised by ZSCORE)
--   COORD_BADARG             ARGV[1] is not a member "P:<n>:<token>" with
--                            1 <= n <= ARGV[3]
--   COORD_BADSTATE           the sorted set lacks a valid capacity record
--                            or holds a member that is not a permit
--   COORD_CAPACITY_MISMATCH  a live permit exists and the recorded capacity
--                            differs from ARGV[3]
local key = KEYS[1]
local member = ARGV[1]
local ttl = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local n = tonumber(string.match(member, '^P:(%d+):.'))
if n == nil or n < 1 or n > want then
  return redis.error_reply('COORD_BADARG permit id is not P:<n>:<token> with 1 <= n <= capacity')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)

local cap = nil
local c = redis.call('ZSCORE', key, 'capacity')
if c then
  c = tonumber(c)
  if c == nil or c >= 0 or c ~= math.floor(c) then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  cap = -c
elseif redis.call('EXISTS', key) == 1 then
  return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
end

-- Live permits (score > now), earliest expiry first.
local live = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES')
local used, mine = 0, false
for i = 1, #live, 2 do
  local w = tonumber(string.match(live[i], '^P:(%d+):'))
  if w == nil then
    return redis.error_reply('COORD_BADSTATE semaphore key holds a member that is not a permit')
  end
  used = used + w
  if live[i] == member then
    mine = true
  end
end
if cap ~= nil and cap ~= want and #live > 0 then
  return redis.error_reply(string.format(
    'COORD_CAPACITY_MISMATCH semaphore has capacity %d with live permits; the caller uses %d', cap, want))
end

local score = '+inf'
if ttl > 0 then
  score = string.format('%d', now + ttl)
end

-- settle sets the key's TTL to the latest permit expiry, or removes it
-- while a permit without expiry is held.
local function settle()
  if redis.call('ZCOUNT', key, '+inf', '+inf') > 0 then
    redis.call('PERSIST', key)
    return
  end
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, top[2])
end

if mine then
  redis.call('ZADD', key, score, member)
  settle()
  return {1, 0, now}
end

redis.call('ZREMRANGEBYSCORE', key, 0, nows)
if used + n > want then
  local retry = -1
  local first = tonumber(live[2])
  if first ~= nil and first ~= math.huge then
    retry = first - now
  end
  return {0, retry, now}
end

if cap ~= want then
  redis.call('ZADD', key, -want, 'capacity')
end
redis.call('ZADD', key, score, member)
settle()
return {1, 0, now}
