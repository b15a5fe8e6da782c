-- fragment rwlease_prune: check, prune and settle the read-write lease's
-- sorted set key at the time nows (now in ms, time_ms). Included where the
-- key is first to be written: its check runs there.
-- prune removes expired entries: holders scored (0, now], waiting writers
-- scored [-now, 0).
local function prune()
  redis.call('ZREMRANGEBYSCORE', key, '(0', nows)
  redis.call('ZREMRANGEBYSCORE', key, '-' .. nows, '(0')
end
-- settle sets the key's TTL to the latest expiry of any entry, and
-- returns the key's lowest score (nil when the key is empty).
local function settle()
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #top == 0 then
    return nil
  end
  local last = math.max(tonumber(top[2]), 0)
  local bottom = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  if -bottom > last then
    last = -bottom
  end
  if last > 0 then
    redis.call('PEXPIREAT', key, string.format('%d', last))
  end
  return bottom
end
-- The key checked, before anything is written: the COORD_BADSTATE error
-- reply is returned from the script when the key's lowest or highest score
-- is not an integer (or, below 0, an integer and a half: an abandoned
-- acquisition's tombstone, rwlease_abandon) within now + 9223372036855 ms (the longest
-- time.Duration, rounded up) of 0: no TTL gives such a score, and settle
-- would turn it into an expiry in the past (deleting every live lease).
local latest = now + 9223372036855
for _, i in ipairs({0, -1}) do
  local e = redis.call('ZRANGE', key, i, i, 'WITHSCORES')
  local v = e[2] and tonumber(e[2])
  if e[2] and not (v and v >= -latest and v <= latest and (v == math.floor(v) or (v < 0 and v * 2 == math.floor(v * 2)))) then
    return redis.error_reply('COORD_BADSTATE read-write lease key holds a score outside its layout')
  end
end
