-- fragment rwlease_prune: prune and settle on the read-write lease's
-- sorted set key at the time nows.
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
