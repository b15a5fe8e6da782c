-- ratelimit_fixed: take permits from a fixed-window counter.
--
-- The window starts at the first acquisition that finds no live state (it is
-- not aligned to the clock) and lasts window_ms; the key expires when it ends,
-- so idle state disappears on its own.
--
-- KEYS[1]  state key: a string "f:<limit>:<window_ms>|<used>|<end_ms>",
--          where end_ms is the window's end in server milliseconds; the key
--          expires at end_ms
-- ARGV[1]  limit: permits per window (integer >= 1)
-- ARGV[2]  window length in milliseconds (integer >= 1)
-- ARGV[3]  permits requested (integer >= 0); 0 probes without consuming
--
-- Reply    {acquired, available, retry_ms}
--          acquired   1 when the permits were taken (for a probe: when at
--                     least one permit is free), else 0
--          available  permits left in the window after this call
--          retry_ms   when not acquired: milliseconds until the window ends
--                     and the request can be admitted; -1 when acquired or
--                     when permits > limit (it can never be admitted)
-- Writes   only when permits >= 1 are taken. A rejection, a probe or an
--          oversized request writes nothing.
-- Errors (raised before anything is written):
--   COORD_BADARG            an argument is not an integer in range
--   WRONGTYPE               the key holds a non-string value (raised by GET)
--   COORD_CONFIG_MISMATCH   the key holds another limiter's state or other
--                           settings
--   COORD_BADSTATE          the value is not in the format above
-- Not idempotent: a re-sent call (go-redis retries after a lost reply) takes
-- the permits again. Use a client with MaxRetries: -1 to avoid that.
local limit, window, permits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not (limit and window and permits) or limit < 1 or window < 1 or permits < 0
    or limit % 1 ~= 0 or window % 1 ~= 0 or permits % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG limit, window and permits must be integers (>= 1, >= 1, >= 0)')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local cfg = 'f:' .. ARGV[1] .. ':' .. ARGV[2] .. '|'
local v = redis.call('GET', KEYS[1])
local used, stop = 0, 0
if v then
  if string.sub(v, 1, #cfg) ~= cfg then
    if string.match(v, '^%a:[%d:]+|') then
      return redis.error_reply('COORD_CONFIG_MISMATCH key holds another limiter or other settings')
    end
    return redis.error_reply('COORD_BADSTATE fixed-window state is malformed')
  end
  local bar = string.find(v, '|', #cfg + 1, true)
  used, stop = nil, nil
  if bar then
    used, stop = tonumber(string.sub(v, #cfg + 1, bar - 1)), tonumber(string.sub(v, bar + 1))
  end
  if not (used and stop) or used < 0 or stop < 0 or used % 1 ~= 0 or stop % 1 ~= 0 or stop >= 9007199254740992 then
    return redis.error_reply('COORD_BADSTATE fixed-window state is malformed')
  end
  if stop <= now then
    used, stop = 0, 0
  end
end
local available = limit - used
if available < 0 then
  available = 0
end
if permits == 0 then
  if available > 0 then
    return {1, available, -1}
  end
  return {0, 0, stop - now}
end
if permits > limit then
  return {0, available, -1}
end
if permits > available then
  return {0, available, stop - now}
end
used = used + permits
if stop == 0 then
  stop = now + window
end
redis.call('SET', KEYS[1], cfg .. used .. '|' .. stop, 'PX', stop - now)
return {1, limit - used, -1}
