-- fragment rl_sliding: the segmented sliding-window arithmetic, in
-- sections, on the settings lim (permits a window), win (its length, µs),
-- segs and g (the segment length, ceil(win / segs) µs), and the state n
-- (the permits the window holds), o and l (its oldest and newest segment:
-- segment i holds the permits taken from i*g to (i+1)*g µs, charged
-- until (i+1)*g + win; o nil: none) and cs (their counts, "c_o,...,c_l").
-- Counts are checked where they are walked (dropping, refusing, giving
-- back, moving to other settings): l - o + 1 counts summing to n. See
-- rl_common for the other names.
--#section load
-- rl_sliding.load: (after rl_common.cfg3) the settings (at most 1024
-- segments), and the state read from sn, so, sl, scs under the stored
-- settings (nil: no state), brought to now (segments whose charge ended are
-- dropped, with the empty ones after them), and under other settings
-- moved to the new segments (each old segment's permits charged to the
-- new segment its end falls in, for as long as both windows still charge
-- them).
local ow, oseg, og = o2, o3, nil
lim, win, segs = n1, n2, n3
if segs > 1024 then
  return redis.error_reply('COORD_BADARG malformed limiter settings')
end
g = (win + segs - 1 - (win + segs - 1) % segs) / segs
if c then
  n, o, l, cs = tonumber(sn), tonumber(so), tonumber(sl), scs
  if not (n and o and l and cs) or oseg > 1024 or n >= MAXN or l >= MAXN or l < o or l - o > 4096 then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
  og = g
  if c ~= cfg then
    og = (ow + oseg - 1 - (ow + oseg - 1) % oseg) / oseg
  end
end
-- Drop what the stored settings no longer charge, move to the new
-- segments, and drop what the new settings no longer charge.
for pass = 1, 2 do
  local w_, g_ = ow, og
  if pass == 2 then
    w_, g_ = win, g
  end
  local cut = o and now - w_
  if cut then
    cut = (cut - cut % g_) / g_
  end
  if o and o < cut then
    local pos, left = 1, n
    while o <= l do
      local _, at, x = string.find(cs, '^(%d+),?', pos)
      x = tonumber(x)
      if not x then
        return redis.error_reply('COORD_BADSTATE limiter state is malformed')
      end
      if o >= cut and x > 0 then
        break
      end
      o, pos, left = o + 1, at + 1, left - x
    end
    if left < 0 or (o > l and (left ~= 0 or pos <= #cs)) then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    n, cs = left, string.sub(cs, pos)
    if o > l then
      o, l, cs = nil, nil, nil
    end
  end
  if pass == 2 or c == cfg then
    break
  end
  if o then
    local k = (now - now % g) / g
    local base, acc, lo, hi, i, sum = k - segs - 3, {}, nil, nil, 0, 0
    for x in string.gmatch(cs, '[^,]+') do
      x = tonumber(x)
      if not x or x % 1 ~= 0 or x < 0 then
        return redis.error_reply('COORD_BADSTATE limiter state is malformed')
      end
      i, sum = i + 1, sum + x
      local e = (o + i) * og -- the old segment's end
      if x > 0 and e + ow > now and e + win > now then
        local j = (e + g - 1 - (e + g - 1) % g) / g - 1
        if j > k then
          j = k -- its permits were taken by now
        end
        if j < base then
          j = base -- cannot happen for a live segment; stay bounded
        end
        acc[j - base] = (acc[j - base] or 0) + x
        if not lo or j < lo then
          lo = j
        end
        if not hi or j > hi then
          hi = j
        end
      end
    end
    if i ~= l - o + 1 or sum ~= n then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    n, o, l, cs = 0, nil, nil, nil
    if lo then
      local t = {}
      for j = lo, hi do
        t[#t + 1] = acc[j - base] or 0
        n = n + t[#t]
      end
      o, l, cs = lo, hi, table.concat(t, ',')
    end
  end
end
if not o then
  n = 0
end
--#section refund
-- rl_sliding.refund: rm, the charge to apply when m < 0 (m, or less): a
-- refund (r) gives back only permits of the grant's own segment (rj: the
-- segment of its time mk), at most what it holds: once that segment has
-- left the window nothing is given back, never the permits of later
-- grants (a new user's finding on the sliding log, which had the same
-- rule).
local rm, rj = m, nil
if op == 'r' then
  rj = (mk - mk % g) / g
  local have, j = 0, o
  if o then
    for x in string.gmatch(cs, '%d+') do
      if j == rj then
        have = have + x
      end
      j = j + 1
    end
  end
  if have < -rm then
    rm = -have
  end
end
--#section wait
-- rl_sliding.wait: wt for want permits: until the oldest segments whose
-- permits free enough are no longer charged.
if want > lim then
  wt = -1
elseif lim - n >= want then
  wt = 0
else
  -- The window may hold more than lim (moved from a larger limit): what
  -- is over lim must leave too (need <= n, as want <= lim).
  local need, freed, j = want - (lim - n), 0, o
  for x in string.gmatch(cs, '%d+') do
    freed, j = freed + x, j + 1
    if freed >= need then
      break
    end
  end
  wt = j * g + win - now
end
--#section sum
-- rl_sliding.sum: av, de and dm.
av = lim - n
if av < 0 then
  av = 0
elseif av > lim then
  av = lim
end
de = now
if o then
  de = (l + 1) * g + win
end
dm = (de + 999 - (de + 999) % 1000) / 1000
--#section take
-- rl_sliding.take: charges m permits to the segment of now (never to an
-- older one than the newest: the clock went back; nothing to an empty
-- window), or (m < 0) gives -rm back, newest first (a refund: oldest
-- first from segment rj); sv (an empty state:
-- "0|0|0|0"). A charge that would take the total to 2^53 is refused,
-- before anything is written (a grant stays within the limit).
if m > 0 or (m == 0 and o) then
  local k = (now - now % g) / g
  if not o then
    o, l, cs = k, k, string.format('%d', m)
  elseif k <= l then
    local pre, last = string.match(cs, '^(.-)(%d+)$')
    cs = pre .. string.format('%d', last + m)
  else
    cs = cs .. string.rep(',0', k - l - 1) .. string.format(',%d', m)
    l = k
  end
  n = n + m
  if n >= MAXN then
    return redis.error_reply('COORD_BADARG the adjustment would take the limiter state out of range')
  end
elseif o then
  local t, left, sum = {}, -m, 0
  for x in string.gmatch(cs, '[^,]+') do
    t[#t + 1] = tonumber(x)
    sum = sum + (t[#t] or 0)
  end
  if #t ~= l - o + 1 or sum ~= n then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
  local j, to, step = #t, 1, -1
  if rj then
    j, to, step = math.max(rj - o + 1, 1), #t, 1
  end
  left = -rm
  while left > 0 and (j - to) * step <= 0 do
    local x = math.min(t[j], left)
    t[j], left, n = t[j] - x, left - x, n - x
    j = j + step
  end
  local f = 1
  while f <= #t and t[f] == 0 do
    f = f + 1
  end
  if f > #t then
    o, l, cs = nil, nil, nil
  else
    o, cs = o + f - 1, table.concat(t, ',', f)
  end
end
if o then
  sv = string.format('%d|%d|%d|', n, o, l) .. cs
else
  sv = '0|0|0|0'
end
