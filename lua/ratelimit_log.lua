-- ratelimit_log: one decision of an exact sliding-log limiter with the
-- server's clock, or an adjustment of a decision already made (settle a
-- reservation, refund a grant): at most limit permits in any span of
-- window_us, counted from the grant times themselves (no segments).
--
-- KEYS[1]  the limiter: a string "<cfg>|<t1>:<k1>,<t2>:<k2>,...". cfg is
--          l:<limit>:<window_us> (limit 1 to 1000); each entry is a
--          server time t (µs) and the k >= 1 permits charged then, in
--          non-decreasing time order, at most limit entries (a charge that
--          would leave more merges the two oldest into the later one's
--          time: those permits leave later, never earlier). An entry
--          leaves at t + window_us; the key expires when the newest does.
--          About 19 bytes per entry.
-- Under other settings the entries stay; the caller's limit and window
-- apply to them at once. A charge (a, permits > 0) is one entry at the
-- server's time; a give-back (a < 0) takes permits from the newest
-- entries first; a refund (r) from the oldest entry no older than its
-- mark (the grant's time) on.
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
local c, p1, p2, sl
if stored then
  c, p1, p2, sl = string.match(v, '^(l:(%d+):(%d+))|([%d:,]+)$')
end
--#include rl_common.foreign
--#include rl_common.clock
local lim, win
if c then
  if #p1 > 4 or #p2 > 16 then
    return redis.error_reply('COORD_BADSTATE limiter settings are malformed')
  end
  lim, win = tonumber(p1), tonumber(p2)
  if lim < 1 or lim > 1000 or win < 1 then
    return redis.error_reply('COORD_BADSTATE limiter settings are malformed')
  end
end
if c ~= cfg then
  if c and op == 's' then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds other settings')
  end
  lim, win = string.match(cfg, '^l:(%d+):(%d+)$')
  lim, win = tonumber(lim), tonumber(win)
  if not lim or lim < 1 or lim > 1000 or win < 1 or win >= MAXN then
    return redis.error_reply('COORD_BADARG malformed limiter settings')
  end
end
-- The live entries (t + win > now), oldest first, and their sum n.
local ts, ks, n = {}, {}, 0
if c then
  local pos, prev, cnt = 1, 0, 0
  while true do
    local _, e, t, k = string.find(sl, '^(%d+):(%d+)', pos)
    if not e or #t > 16 or #k > 15 then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    t, k = tonumber(t), tonumber(k)
    cnt = cnt + 1
    if t < prev or t >= MAXN or k < 1 or cnt > 1000 then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    prev = t
    if t + win > now then
      ts[#ts + 1], ks[#ks + 1], n = t, k, n + k
    end
    pos = e + 1
    if pos > #sl then
      break
    end
    if string.byte(sl, pos) ~= 44 then -- ','
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    pos = pos + 1
  end
end
-- A refund gives back only what entries no older than its grant hold.
local rm, rj = m, nil
if op == 'r' then
  local have = 0
  for i = 1, #ts do
    if ts[i] >= mk then
      rj = rj or i
      have = have + ks[i]
    end
  end
  if have < -rm then
    rm = -have
  end
end
if want > lim then
  wt = -1
elseif n + want <= lim then
  wt = 0
else
  local need, acc, j = n + want - lim, 0, 0
  while acc < need and j < #ts do
    j = j + 1
    acc = acc + ks[j]
  end
  wt = ts[j] + win - now
end
av = lim - n
if av < 0 then
  av = 0
end
de = now
if #ts > 0 then
  de = ts[#ts] + win
end
dm = (de + 999 - (de + 999) % 1000) / 1000
--#include rl_common.decide
if answer then
--#include rl_common.answer
end
if m > 0 then
  local t = now
  if #ts > 0 and ts[#ts] >= now then
    t = ts[#ts]
    ks[#ks] = ks[#ks] + m
  else
    ts[#ts + 1], ks[#ks + 1] = t, m
  end
  if ks[#ks] >= 1e14 then
    ks[#ks] = 1e14 - 1
  end
  while #ts > lim do
    ks[2] = ks[1] + ks[2]
    table.remove(ts, 1)
    table.remove(ks, 1)
  end
else
  -- Give -rm permits back: newest first (a), or oldest first from the
  -- grant's entry (r).
  local left, i, last, step = -rm, #ts, 1, -1
  if rj then
    i, last, step = rj, #ts, 1
  end
  while left > 0 and i >= 1 and i <= #ts and (i - last) * step <= 0 do
    local x = ks[i]
    if x > left then
      x = left
    end
    ks[i], left = ks[i] - x, left - x
    i = i + step
  end
end
n = 0
local out = {}
for i = 1, #ts do
  if ks[i] > 0 then
    out[#out + 1] = string.format('%d:%d', ts[i], ks[i])
    n = n + ks[i]
    de = ts[i] + win
  end
end
if #out == 0 then
  de = now
end
av = lim - n
if av < 0 then
  av = 0
end
dm = (de + 999 - (de + 999) % 1000) / 1000
sv = table.concat(out, ',')
--#include rl_common.store
