-- fragment rl_bucket: the token-bucket arithmetic, in sections, on the
-- settings lim (the bucket's size), per (tokens added a period) and
-- period (µs), and the state tk (tokens in the bucket; below 0: a debt
-- from charges) and r (when the current refill period started, server
-- µs). See rl_common for the other names.
--#section load
-- rl_bucket.load: (after rl_common.cfg3) the settings, and the state
-- read from st, sr under the stored settings (nil: no state: a full
-- bucket), refilled by the whole periods since r at the stored rate, and
-- under other settings capped at the new size and then refilled at the
-- new rate.
local ol, op_, od = o1, o2, o3
lim, per, period = n1, n2, n3
if c then
  tk, r = tonumber(st), tonumber(sr)
  if not (tk and r) or tk > ol or tk <= -MAXN or r >= MAXN then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
end
if not c then
  tk, r = lim, now
else
  for pass = 1, 2 do
    local l_, p_, d_ = ol, op_, od
    if pass == 2 then
      l_, p_, d_ = lim, per, period
    end
    if tk < l_ and now > r then
      local k = (now - r - (now - r) % d_) / d_
      local fill = l_ - tk + p_ - 1
      if k >= (fill - fill % p_) / p_ then
        tk = l_
      else
        tk, r = tk + k * p_, r + k * d_
      end
    end
    if tk >= l_ then
      tk, r = l_, now
    end
    if c == cfg then
      break
    end
    if tk >= lim then
      tk, r = lim, now
    end
  end
end
--#section refund
-- rl_bucket.refund: rm, the charge to apply when m < 0 (m, or 0): a
-- refund (r) gives nothing back unless no refill period began since the
-- grant (the current one, from r, began at or before the grant's time mk:
-- none of the grant's tokens came back by itself, and the bucket was not
-- full since).
local rm = m
if op == 'r' and r > mk then
  rm = 0
end
--#section wait
-- rl_bucket.wait: wt for want permits.
if want > lim then
  wt = -1
elseif tk >= want then
  wt = 0
else
  local short = want - tk + per - 1
  wt = r + (short - short % per) / per * period - now
end
--#section sum
-- rl_bucket.sum: av, de and dm.
av = tk
if av < 0 then
  av = 0
end
if tk >= lim then
  de = now
else
  local short = lim - tk + per - 1
  de = r + (short - short % per) / per * period
end
dm = (de + 999 - (de + 999) % 1000) / 1000
--#section take
-- rl_bucket.take: charges m permits (m < 0: gives -rm back, up to a
-- full bucket); sv. A debt (tk < 0) stays one whose refill ends before 2^53
-- µs (de, exact): an adjustment that would take it further is refused,
-- before anything is written (a grant leaves no debt).
if m < 0 then
  tk = tk - rm
else
  tk = tk - m
end
if m < 0 and tk >= lim then
  tk, r = lim, now
elseif tk < 0 then
  local short = lim - tk + per - 1
  if short >= MAXN or r + (short - short % per) / per * period >= MAXN then
    return redis.error_reply('COORD_BADARG the adjustment would take the limiter state out of range')
  end
end
sv = string.format('%d|%d', tk, r)
