-- ratelimit_reset: a consumptive rate limiter's key back to empty
-- (Limiter.Reset): the key is deleted, so the next decision finds a full
-- limiter (a fixed or sliding window with nothing taken, a full bucket, a
-- GCRA burst back).
--
-- KEYS[1]  the limiter: a string "<cfg>|<state>" (ratelimit_fixed,
--          _sliding, _bucket, _gcra, _throttle, _log) or a composite's hash (field c: its
--          signature; ratelimit_composite)
-- ARGV[1]  the caller's algorithm: f, s, b, g, t, l, or c (a composite)
-- ARGV[2]  (a composite) its components' algorithms in order, e.g. "bsf":
--          the stored signature (its cfgs joined with ';') must have the
--          same
--
-- Reply    1 when the key held a limiter's state (deleted), 0 when there
--          was no key
-- Writes   DEL of the key.
-- Errors (raised before anything is written):
--   COORD_BADARG            ARGV[1] is not one of the letters
--   WRONGTYPE               the key is not a string (a composite: not a
--                           hash) (raised by GET, HGET)
--   COORD_CONFIG_MISMATCH   the key holds another algorithm's limiter
--   COORD_BADSTATE          the key holds something that is no limiter's
-- Idempotent: a re-send finds the key gone.
local al = ARGV[1]
if al == 'c' then
  local sig = redis.call('HGET', KEYS[1], 'c')
  if not sig then
    if redis.call('EXISTS', KEYS[1]) == 1 then
      return redis.error_reply('COORD_BADSTATE composite hash lacks its signature')
    end
    return 0
  end
  local kinds = ''
  for part in string.gmatch(sig, '[^;]+') do
    local k = string.match(part, '^([fsbg]):%d')
    if not k then
      return redis.error_reply('COORD_BADSTATE composite signature is malformed')
    end
    kinds = kinds .. k
  end
  if kinds == '' then
    return redis.error_reply('COORD_BADSTATE composite signature is malformed')
  end
  if kinds ~= ARGV[2] then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds another composite')
  end
elseif al == 'f' or al == 's' or al == 'b' or al == 'g' or al == 't' or al == 'l' then
  local v = redis.call('GET', KEYS[1])
  if not v then
    return 0
  end
  if not string.find(v, '^%a:%d[^|]*|') then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
  if string.sub(v, 1, 1) ~= al then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds another algorithm')
  end
else
  return redis.error_reply('COORD_BADARG unknown algorithm')
end
redis.call('DEL', KEYS[1])
return 1
