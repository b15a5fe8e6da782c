-- fragment rl_fixed: the fixed-window arithmetic, in sections, on the
-- settings lim (permits a window), win (its length, ms; 0: a calendar
-- period) and ax (its alignment, the cfg's suffix: '' none, ':e' epoch,
-- ':<p>:<zone>' a calendar period p of m, h, d, M in a zone, whose
-- boundaries come in bs, "<b0>,<b1>,<b2>,<b3>": four consecutive period
-- starts in ms computed by the caller around its clock), and the state e
-- (when the window ends, server ms; 0: no window) and u (the permits taken
-- in it). See rl_common for the other names.
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
  lim, win, ax = string.match(cfg, '^f:(%d+):(%d+)(.*)$')
  lim, win = tonumber(lim), tonumber(win)
  if not lim or lim < 1 or lim >= MAXN or win >= MAXN or ((ax == '' or ax == ':e') and win < 1)
      or (ax ~= '' and ax ~= ':e' and (win ~= 0 or not string.find(ax, '^:[mhdM]:[%w/_+.-]+$'))) then
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
-- A calendar window's start is the boundary before its end in bs (none
-- there: nothing is given back).
local rm = m
if op == 'r' then
  if e == 0 or (fe and tonumber(e) ~= mk) then
    rm = 0
  elseif not fe then
    if not win then
      win, ax = string.match(cfg, '^f:%d+:(%d+)(.*)$')
      win = tonumber(win)
    end
    local ws = e - win
    if win == 0 then
      local b = {}
      for x in string.gmatch(bs or '', '%d+') do
        b[#b + 1] = tonumber(x)
      end
      for j = 2, #b do
        if b[j] == tonumber(e) then
          ws = b[j - 1]
        end
      end
    end
    if ws * 1000 > mk then
      rm = 0
    end
  end
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
-- empty); a charge with no window starts one (by its alignment: now plus
-- win; the next multiple of win; the boundary in bs after now, raising
-- COORD_BADARG for malformed boundaries and COORD_CLOCK when now is
-- outside them; ratelimit_fixed, fe, reads bs from ARGV[4] only here);
-- sv. (A count past 10^14 is kept just below it: the window
-- refuses until it ends either way.)
if m < 0 then
  u = u + rm
  if u < 0 then
    u = 0
  end
else
  if e == 0 then
    if not win then
      win, ax = string.match(cfg, '^f:%d+:(%d+)(.*)$')
      win = tonumber(win)
    end
    e = (now - now % 1000) / 1000
    if ax == '' then
      e = e + win
    elseif ax == ':e' then
      e = e - e % win + win
    else
      if fe then
        bs = ARGV[4]
      end
      local b1, b2, b3, b4 = string.match(bs or '', '^(%d+),(%d+),(%d+),(%d+)$')
      b1, b2, b3, b4 = tonumber(b1), tonumber(b2), tonumber(b3), tonumber(b4)
      if not b1 or b1 >= b2 or b2 >= b3 or b3 >= b4 or b4 >= 9007199254740 then
        return redis.error_reply('COORD_BADARG malformed calendar boundaries')
      end
      if now < b1 * 1000 or now >= b4 * 1000 then
        return redis.error_reply('COORD_CLOCK the server clock is outside the calendar periods the client computed: the clocks differ by more than a period')
      end
      if now < b2 * 1000 then
        e = b2
      elseif now < b3 * 1000 then
        e = b3
      else
        e = b4
      end
    end
  end
  u = u + m
  if u >= 1e14 then
    u = 1e14 - 1
  end
end
sv = e .. '|' .. u
