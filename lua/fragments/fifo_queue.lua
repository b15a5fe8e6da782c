-- fragment fifo_queue: the first-in first-out queue of the blocked
-- waiters of KEYS[1], kept in two keys of KEYS[1]'s Cluster slot:
-- KEYS[2], a sorted set (member a waiter's owner token, score its arrival
-- number: 1 for the first waiter of an empty queue, then one more than
-- the last one's), and KEYS[3], a hash (field a waiter's owner token,
-- value the server time in ms until which it counts as alive; each of the
-- waiter's attempts moves it on). Both expire with the longest-lived
-- waiter. fifo_head(now) removes the waiters at the head whose time has
-- passed (or that have none) and returns the head's token, false for an
-- empty queue. fifo_join(token, now, live) adds token at the tail unless
-- it is queued, and keeps it alive until now + live. fifo_leave(token)
-- removes token.
local function fifo_head(now)
  while true do
    local h = redis.call('ZRANGE', KEYS[2], 0, 0)
    if #h == 0 then
      return false
    end
    local alive = tonumber(redis.call('HGET', KEYS[3], h[1]))
    if alive and alive > now then
      return h[1]
    end
    redis.call('ZREM', KEYS[2], h[1])
    redis.call('HDEL', KEYS[3], h[1])
  end
end
local function fifo_join(token, now, live)
  redis.call('HSET', KEYS[3], token, now + live)
  if not redis.call('ZSCORE', KEYS[2], token) then
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    local n = 1
    if #last == 2 then
      n = tonumber(last[2]) + 1
    end
    redis.call('ZADD', KEYS[2], n, token)
  end
  for i = 2, 3 do
    if redis.call('PTTL', KEYS[i]) < live then
      redis.call('PEXPIRE', KEYS[i], live)
    end
  end
end
local function fifo_leave(token)
  redis.call('ZREM', KEYS[2], token)
  redis.call('HDEL', KEYS[3], token)
end
