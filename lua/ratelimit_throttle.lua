-- ratelimit_throttle: one decision of a sliding-expiration throttle with
-- the server's clock, or an adjustment of a decision already made (settle
-- a reservation, refund a grant): up to limit permits in one run of
-- attempts, a run lasting while no two attempts are quiet_ms or more
-- apart; once the limit is used every attempt, granted or not, pushes the
-- end of the block to quiet_ms after it.
--
-- KEYS[1]  the limiter: a string "<cfg>|<n>|<s>|<l>". cfg is
--          t:<limit>:<quiet_ms>; n is the permits counted in the current
--          run (it may pass limit after a charge), s the server time
--          (µs) of the run's first counted attempt and l that of its
--          latest attempt (s <= l). The run ends, and the count starts
--          over, at l + quiet_ms * 1000 µs; the key expires then.
-- Unlike the other algorithms' decisions, a refused decision for 1 to
-- limit permits writes: it moves l to the server's time (never back), so
-- a caller that keeps trying stays blocked; its wait is then quiet_ms (in
-- µs). A probe (0 permits) and a request for more than limit permits
-- (wait -1) write nothing. A charge (a, permits > 0) is an attempt too
-- (moves l); a give-back (a < 0, r) does not. A refund (r) gives back
-- only to the run that holds the grant (s at or before its mark, the
-- grant's server time), never below 0.
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
local c, p1, p2, sn, ss, sl
if stored then
  c, p1, p2, sn, ss, sl = string.match(v, '^(t:(%d+):(%d+))|(%d+)|(%d+)|(%d+)$')
end
--#include rl_common.foreign
--#include rl_common.clock
local lim, q, n, s, l
if c then
  if #p1 > 15 or #p2 > 15 or #sn > 15 or #ss > 16 or #sl > 16 then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
  lim, q, n, s, l = tonumber(p1), tonumber(p2), tonumber(sn), tonumber(ss), tonumber(sl)
  if lim < 1 or q < 1 or s > l or l >= MAXN then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
end
if c ~= cfg then
  if c and op == 's' then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds other settings')
  end
  lim, q = string.match(cfg, '^t:(%d+):(%d+)$')
  lim, q = tonumber(lim), tonumber(q)
  if not lim or lim < 1 or lim >= MAXN or q < 1 or q >= 9007199254740 then
    return redis.error_reply('COORD_BADARG malformed limiter settings')
  end
end
local qu = q * 1000
-- A run that has been quiet for quiet_ms is over: the count starts over
-- (a state with a count of 0 is the same as none).
if not c or l + qu <= now or n == 0 then
  n, s, l = 0, now, now
end
local rm = m
if op == 'r' and (n == 0 or s > mk) then
  rm = 0
end
if want > lim then
  wt = -1
elseif n + want <= lim then
  wt = 0
else
  wt = l + qu - now
end
av = lim - n
if av < 0 then
  av = 0
end
de = now
if n > 0 then
  de = l + qu
end
dm = (de + 999 - (de + 999) % 1000) / 1000
if (op == 'd' or op == 's') and wt > 0 and permits > 0 then
  -- A refused attempt: the block now ends quiet_ms after it.
  if now > l then
    l = now
  end
  de = l + qu
  dm = (de + 999 - (de + 999) % 1000) / 1000
  redis.call('SET', KEYS[1], string.format('%s|%d|%d|%d', cfg, n, s, l), 'PXAT', dm)
  return {av, de - now}
end
--#include rl_common.decide
if answer then
--#include rl_common.answer
end
if m > 0 then
  n = n + m
  if n >= 1e14 then
    n = 1e14 - 1
  end
  if now > l then
    l = now
  end
else
  n = n + rm
  if n < 0 then
    n = 0
  end
end
av = lim - n
if av < 0 then
  av = 0
end
de = now
if n > 0 then
  de = l + qu
end
dm = (de + 999 - (de + 999) % 1000) / 1000
sv = string.format('%d|%d|%d', n, s, l)
--#include rl_common.store
