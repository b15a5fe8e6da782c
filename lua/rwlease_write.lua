-- rwlease_write: take the exclusive write lease if no live reader or
-- writer holds the key; a refused blocking writer records that it waits.
--
-- KEYS[1]  read-write lease key (layout in rwlease_read.lua)
-- ARGV[1]  lease id: the member "W:<token>", token the caller's random
--          owner token
-- ARGV[2]  TTL in milliseconds (integer >= 1)
-- ARGV[3]  waiting writer's marker lifetime in milliseconds: when > 0 and
--          the lease is refused, the member "Q:<token>" is set to expire
--          ARGV[3] ms from now, and readers that honour writer preference
--          are refused while it is live; 0 records nothing
--
-- Reply    {1, 0, now_ms}         acquired (the caller's Q:<token> marker
--                                 is removed); also when the caller's own
--                                 entry is live already (a re-sent
--                                 request): its expiry is set again
--          {0, retry_ms, now_ms}  live readers or another writer hold the
--                                 key; retry_ms until the earliest of them
--                                 expires
--          now_ms is the server time the script ran at.
-- Errors (all raised before anything is written):
--   WRONGTYPE       the key is not a sorted set (raised by ZSCORE)
--   COORD_BADARG    ARGV[1] is not "W:<token>"
--   COORD_BADSTATE  a live entry in the holders' (or the waiting
--                   writers') score range is not R:/W: (or Q:)
local key, member = KEYS[1], ARGV[1]
local ttl = tonumber(ARGV[2])
local mark = tonumber(ARGV[3])
if string.sub(member, 1, 2) ~= 'W:' or #member < 3 then
  return redis.error_reply('COORD_BADARG write lease id is not W:<token>')
end
local queue = 'Q:' .. string.sub(member, 3)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)

local mine = redis.call('ZSCORE', key, member)
local holder = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local waiting = redis.call('ZRANGEBYSCORE', key, '-inf', '(-' .. nows, 'WITHSCORES', 'LIMIT', 0, 1)
local hk = holder[1] and string.sub(holder[1], 1, 2)
if (hk and hk ~= 'R:' and hk ~= 'W:') or (waiting[1] and string.sub(waiting[1], 1, 2) ~= 'Q:') then
  return redis.error_reply('COORD_BADSTATE read-write lease key holds an entry that is not R:, W: or Q:<token> in its score range')
end

-- prune removes expired entries: holders scored (0, now], waiting writers
-- scored [-now, 0).
local function prune()
  redis.call('ZREMRANGEBYSCORE', key, '(0', nows)
  redis.call('ZREMRANGEBYSCORE', key, '-' .. nows, '(0')
end
-- settle sets the key's TTL to the latest expiry of any entry.
local function settle()
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #top == 0 then
    return
  end
  local last = math.max(tonumber(top[2]), 0)
  local bottom = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  if -bottom > last then
    last = -bottom
  end
  if last > 0 then
    redis.call('PEXPIREAT', key, string.format('%d', last))
  end
end
local exp = string.format('%d', now + ttl)

if mine and tonumber(mine) > now then
  redis.call('ZADD', key, exp, member)
  redis.call('ZREM', key, queue)
  prune()
  settle()
  return {1, 0, now}
end
if holder[1] then
  prune()
  if mark > 0 then
    redis.call('ZADD', key, string.format('%d', -(now + mark)), queue)
  end
  settle()
  return {0, tonumber(holder[2]) - now, now}
end
redis.call('ZREM', key, queue)
prune()
redis.call('ZADD', key, exp, member)
settle()
return {1, 0, now}
