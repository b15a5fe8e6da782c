-- ratelimit_bucket: take tokens from a token bucket.
--
-- A bucket with no state is full. Every whole refill period since the last
-- refill adds tokens_per_period tokens, up to the limit; a partial period is
-- kept (refill_ms advances by whole periods only). No timer runs: refill is
-- computed from server time when the bucket is used. The key expires when
-- the bucket would be full again.
--
-- KEYS[1]  state key: a string "b:<limit>:<per>:<period_ms>|<tokens>|<refill_ms>"
--          (refill_ms: server time the current refill period started)
-- ARGV[1]  limit: bucket capacity in tokens (integer >= 1)
-- ARGV[2]  tokens added per period (integer >= 1)
-- ARGV[3]  refill period in milliseconds (integer >= 1)
-- ARGV[4]  permits (tokens) requested (integer >= 0); 0 probes without
--          consuming
--
-- Reply    {acquired, available, retry_ms}
--          acquired   1 when the tokens were taken (probe: one is there)
--          available  tokens in the bucket after this call
--          retry_ms   when not acquired: milliseconds until enough whole
--                     periods have passed to admit the request; -1 when
--                     acquired or when permits > limit
-- Writes   only when permits >= 1 are taken.
-- Errors (raised before anything is written):
--   COORD_BADARG            an argument is not an integer in range
--   WRONGTYPE               the key holds a non-string value (raised by GET)
--   COORD_CONFIG_MISMATCH   the key holds another limiter's state or other
--                           settings
--   COORD_BADSTATE          the value is not in the format above, or holds
--                           more tokens than the limit
-- Not idempotent: a re-sent call (go-redis retries after a lost reply) takes
-- the tokens again. Use a client with MaxRetries: -1 to avoid that.
local limit, per, period, permits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not (limit and per and period and permits) or limit < 1 or per < 1 or period < 1 or permits < 0
    or limit % 1 ~= 0 or per % 1 ~= 0 or period % 1 ~= 0 or permits % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG limit, tokens per period, period and permits must be integers (>= 1, >= 1, >= 1, >= 0)')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local cfg = 'b:' .. ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3] .. '|'
local v = redis.call('GET', KEYS[1])
local tokens, refill = limit, now
if v then
  if string.sub(v, 1, #cfg) ~= cfg then
    if string.match(v, '^%a:[%d:]+|') then
      return redis.error_reply('COORD_CONFIG_MISMATCH key holds another limiter or other settings')
    end
    return redis.error_reply('COORD_BADSTATE token-bucket state is malformed')
  end
  local bar = string.find(v, '|', #cfg + 1, true)
  tokens, refill = nil, nil
  if bar then
    tokens, refill = tonumber(string.sub(v, #cfg + 1, bar - 1)), tonumber(string.sub(v, bar + 1))
  end
  if not (tokens and refill) or tokens < 0 or refill < 0 or tokens % 1 ~= 0 or refill % 1 ~= 0 or refill >= 9007199254740992 then
    return redis.error_reply('COORD_BADSTATE token-bucket state is malformed')
  end
  if tokens > limit then
    return redis.error_reply('COORD_BADSTATE token-bucket state holds more tokens than its limit')
  end
  if now > refill and tokens < limit then
    local e = now - refill
    local periods = (e - e % period) / period
    local missing = limit - tokens
    -- periods needed to fill up: ceil(missing / per)
    local fill = (missing + per - 1 - (missing + per - 1) % per) / per
    if periods >= fill then
      tokens = limit
    else
      tokens = tokens + periods * per
      refill = refill + periods * period
    end
  end
  if tokens == limit then
    refill = now
  end
end
local want = permits -- the request is refused unless tokens >= want
if permits == 0 then
  want = 1
end
if permits > limit then
  return {0, tokens, -1}
end
if tokens < want then
  -- ms until the bucket holds want tokens: ceil((want - tokens) / per)
  -- whole periods after the current period started
  local short = want - tokens + per - 1
  return {0, tokens, refill + (short - short % per) / per * period - now}
end
if permits == 0 then
  return {1, tokens, -1}
end
tokens = tokens - permits
-- the key expires when the bucket would be full again
local short = limit - tokens + per - 1
redis.call('SET', KEYS[1], cfg .. tokens .. '|' .. refill, 'PX', refill + (short - short % per) / per * period - now)
return {1, tokens, -1}
