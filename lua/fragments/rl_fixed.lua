-- fragment rl_fixed: the fixed-window arithmetic, in sections, on the
-- settings lim (permits a window) and win (its length, ms), and the state
-- e (when the window ends, server ms; 0: no window) and u (the permits
-- taken in it). See rl_common for the other names.
--#section load
-- rl_fixed.load: the settings from cfg, and the state read from se, su
-- under the stored limit pl (c: the stored cfg; nil: no state).
-- Under other settings the count and the window's end stay (the new
-- length applies from the next window). A key holding a window expires
-- when the window ends, so a stored window is live: the clock is read
-- only to start a window or to refuse (and a window found over then is
-- empty). (An operator's PERSIST past the end defeats this for one grant:
-- counted in the old window, whose key that grant's write then deletes.)
-- The stored end is used as read (a string) until arithmetic needs it:
-- it is written back unchanged; the length (win) is read from cfg only
-- to start a window.
if c then
  -- At most 15 digits (below 2^53). A one-limiter key's end has no
  -- leading 0 (the pattern that read it): at least 1, as every window
  -- written. (A composite's empty component is "0|0"; its clock is read.)
  if #se > 15 or #su > 15 then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
  e, u = se, tonumber(su)
else
  e, u = 0, 0
end
if c == cfg then
  lim = tonumber(pl)
else
  if c and (#pl > 15 or tonumber(pl) < 1) then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
  if c and op == 's' then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds other settings')
  end
  lim, win = string.match(cfg, '^f:(%d+):(%d+)$')
  lim, win = tonumber(lim), tonumber(win)
  if not lim or lim < 1 or win < 1 or lim >= MAXN or win >= MAXN then
    return redis.error_reply('COORD_BADARG malformed limiter settings')
  end
end
if not now and (e == 0 or u + want > lim or op == 'r') then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
if now and e * 1000 <= now then
  e, u = 0, 0
end
--#section refund
-- rl_fixed.refund: rm, the charge to apply when m < 0 (m, or 0): a refund
-- (r) gives nothing back but to a live window: the grant's, whose end is
-- the mark mk (fe: ratelimit_fixed), or (a composite's component, mk the
-- grant's time) one whose start, its end less its length under the
-- caller's settings, is at most mk. (After an Update that lengthened the
-- window, the start so computed is earlier than the real one.)
local rm = m
if op == 'r' and (e == 0 or (fe and tonumber(e) ~= mk) or (not fe and (e - (win or tonumber(string.match(cfg, '(%d+)$')))) * 1000 > mk)) then
  rm = 0
end
--#section wait
-- rl_fixed.wait: wt for want permits.
if want > lim then
  wt = -1
elseif u + want <= lim then
  wt = 0
else
  wt = e * 1000 - now
end
--#section sum
-- rl_fixed.sum: av, de and dm (the window's end as read: a string; de
-- only where the clock was read).
av = lim - u
if av < 0 then
  av = 0
elseif av > lim then
  av = lim
end
dm = e
de = now and e * 1000
--#section take
-- rl_fixed.take: charges m permits (m < 0: gives -rm back, never below
-- empty); a charge with no window starts one; sv. (A count past 10^14 is
-- kept just below it: the window refuses until it ends either way.)
if m < 0 then
  u = u + rm
  if u < 0 then
    u = 0
  end
else
  if e == 0 then
    e = (now - now % 1000) / 1000 + (win or tonumber(string.match(cfg, '(%d+)$')))
  end
  u = u + m
  if u >= 1e14 then
    u = 1e14 - 1
  end
end
sv = e .. '|' .. u
