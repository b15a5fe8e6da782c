-- fragment rl_gcra: the GCRA arithmetic (the Generic Cell Rate
-- Algorithm, ITU-T I.371), in sections, on the settings x (the burst),
-- q and d (one permit every q/d µs) and span (x * q: the burst in 1/d
-- µs), and the state a and b (the theoretical arrival time is a + b/d µs,
-- 0 <= b < d). See rl_common for the other names.
--#section load
-- rl_gcra.load: (after rl_common.cfg3) the settings, and the state read
-- from sa, sb under the stored settings (nil: no state), moved to the
-- caller's settings when they differ (the debt in permits kept, rounded
-- up to the new interval), brought to now (a past arrival time is now).
local ox, oq, od = o1, o2, o3
x, q, d = n1, n2, n3
if c then
  a, b = tonumber(sa), tonumber(sb)
  if not (a and b) or a >= MAXN or b >= od then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
end
span = x * q
if not c or a < now then
  a, b = now, 0
end
if c and c ~= cfg then
  local w = (a - now) * od + b
  local k, r = (w - w % oq) / oq, w % oq
  w = k * q + (r * q + oq - 1 - (r * q + oq - 1) % oq) / oq
  a, b = now + (w - w % d) / d, w % d
end
--#section refund
-- rl_gcra.refund: rm and rq, what m < 0 gives back, in permits (m, or 0:
-- nothing) and in 1/d µs: a refund (r) gives back only what of the
-- grant has not come back by itself: its charge less the time since the
-- grant's time mk.
local rm, rq = m, -m * q
if op == 'r' and now > mk then
  rq = rq - (now - mk) * d
  if rq <= 0 then
    rm, rq = 0, 0
  end
end
--#section wait
-- rl_gcra.wait: wt for want permits.
if want > x then
  wt = -1
else
  wt = (a - now) * d + b + want * q - span
  if wt <= 0 then
    wt = 0
  else
    wt = (wt + d - 1 - (wt + d - 1) % d) / d
  end
end
--#section sum
-- rl_gcra.sum: av, de and dm.
av = span - (a - now) * d - b
av = (av - av % q) / q
if av < 0 then
  av = 0
elseif av > x then
  av = x
end
de = a
if b > 0 then
  de = a + 1
end
dm = (de + 999 - (de + 999) % 1000) / 1000
--#section take
-- rl_gcra.take: charges m permits (m < 0: gives rq back, never below
-- empty); sv. The arrival time's lead over now in 1/d µs, (a - now) * d
-- + b, stays below 2^53 - now (exact, and a below 2^53): an adjustment
-- or a refund that would take it there is refused, before anything is
-- written (a grant leaves at most the burst ahead: never near).
if m >= 0 then
  local w = b + m * q
  a, b = a + (w - w % d) / d, w % d
  if op == 'a' and (w >= MAXN or (a - now) * d + b >= MAXN - now) then
    return redis.error_reply('COORD_BADARG the adjustment would take the limiter state out of range')
  end
else
  local w = (a - now) * d + b - rq
  if w < 0 then
    w = 0
  elseif w >= MAXN - now then
    return redis.error_reply('COORD_BADARG the adjustment would take the limiter state out of range')
  end
  a, b = now + (w - w % d) / d, w % d
end
sv = string.format('%d|%d', a, b)
