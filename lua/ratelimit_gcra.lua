-- ratelimit_gcra: take permits with the Generic Cell Rate Algorithm
-- (ATM Forum Traffic Management 4.0, virtual-scheduling form).
--
-- One theoretical arrival time (tat, server milliseconds) is stored. A batch
-- of n permits is admitted at now when tat' = max(tat, now) + n*interval
-- satisfies tat' - burst*interval <= now; the batch is all or nothing.
--
-- KEYS[1]  state key: a string "g:<burst>:<interval_ms>|<tat_ms>"; it
--          expires at tat_ms, when the full burst is available again
-- ARGV[1]  burst: total burst capacity (integer >= 1)
-- ARGV[2]  emission interval in milliseconds (integer >= 1)
-- ARGV[3]  permits requested (integer >= 0); 0 probes for one permit
--          without consuming
--
-- Reply    {acquired, available, retry_ms}
--          acquired   1 when the batch was admitted (probe: one permit is
--                     free), else 0
--          available  whole permits available after this call
--          retry_ms   when not acquired: milliseconds until the whole batch
--                     (probe: one permit) would be admitted; -1 when
--                     acquired or when permits > burst
-- Writes   only when permits >= 1 are admitted. Rejections, probes and
--          oversized requests leave the stored timestamp unchanged.
-- Errors (raised before anything is written):
--   COORD_BADARG            an argument is not an integer in range
--   WRONGTYPE               the key holds a non-string value (raised by GET)
--   COORD_CONFIG_MISMATCH   the key holds another limiter's state or other
--                           settings
--   COORD_BADSTATE          the value is not in the format above
-- Not idempotent: a re-sent call (go-redis retries after a lost reply) takes
-- the permits again. Use a client with MaxRetries: -1 to avoid that.
local burst, interval, permits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not (burst and interval and permits) or burst < 1 or interval < 1 or permits < 0
    or burst % 1 ~= 0 or interval % 1 ~= 0 or permits % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG burst, interval and permits must be integers (>= 1, >= 1, >= 0)')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
-- The stored value starts with the settings; compare that prefix as is
-- (no pattern matching on the hot path).
local cfg = 'g:' .. ARGV[1] .. ':' .. ARGV[2] .. '|'
local v = redis.call('GET', KEYS[1])
local tat = now
if v then
  if string.sub(v, 1, #cfg) ~= cfg then
    if string.match(v, '^%a:[%d:]+|') then
      return redis.error_reply('COORD_CONFIG_MISMATCH key holds another limiter or other settings')
    end
    return redis.error_reply('COORD_BADSTATE GCRA state is malformed')
  end
  local s = tonumber(string.sub(v, #cfg + 1))
  if not s or s < 0 or s % 1 ~= 0 or s >= 9007199254740992 then
    return redis.error_reply('COORD_BADSTATE GCRA state is malformed')
  end
  if s > now then
    tat = s
  end
end
local span = burst * interval
local n = permits
if n == 0 then
  n = 1 -- a probe asks whether one permit conforms
end
local newtat = tat + n * interval
local conforms = n <= burst and newtat - span <= now
if conforms and permits > 0 then
  redis.call('SET', KEYS[1], cfg .. newtat, 'PX', newtat - now)
  tat = newtat
end
-- available = floor((now + span - tat) / interval), clamped to [0, burst]
local d = now + span - tat
local available = 0
if d > 0 then
  available = (d - d % interval) / interval
  if available > burst then
    available = burst
  end
end
if conforms then
  return {1, available, -1}
end
if n > burst then
  return {0, available, -1}
end
return {0, available, newtat - span - now}
