-- ratelimit_log: one decision of an exact sliding-log limiter with the
-- server's clock, or an adjustment of a decision already made (settle a
-- reservation, refund a grant): at most limit permits in any span of
-- window_us, counted from the grant times themselves (no segments).
--
-- KEYS[1]  the limiter: a string "<cfg>|<n>|<e>|<last>|<t1>:<k1>,<t2>:<k2>,...".
--          cfg is l:<limit>:<window_us> (limit 1 to 1000); each entry is a
--          server time t (µs) and the k >= 1 permits charged then, in
--          non-decreasing time order; n is the sum of the k (below
--          10^15), e the number of entries (1 to 1000, at most limit after
--          a charge), last the newest entry's t. An entry leaves at t +
--          window_us; the key expires when the newest does. About 19
--          bytes per entry. A decision reads only the entries it needs:
--          those that left the window (dropped), and for a refusal the
--          oldest ones until enough would leave; a grant appends; only
--          give-backs (a < 0, r) read every entry.
-- A charge that would leave more than limit entries merges the two
-- oldest into the later one's time (those permits leave later, never
-- earlier). Under other settings the entries stay; the caller's limit and
-- window apply to them at once. A charge (a, permits > 0) is one entry at
-- the server's time (merged into the newest when that is not older); a
-- give-back (a < 0) takes permits from the newest entries first; a
-- refund (r) only from the grant's own entry, the one at its mark (the
-- grant's time): once that entry has left the window (or was merged into
-- a later one) nothing is given back, never another grant's permits.
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
-- (The entries are read in place, from position at of v: the header is
-- matched, never the whole value.)
local c, p1, p2, sn, se, sz, at
if stored then
  c, p1, p2, sn, se, sz, at = string.match(v, '^(l:(%d+):(%d+))|(%d+)|(%d+)|(%d+)|()%d')
end
--#include rl_common.foreign
--#include rl_common.clock
local lim, win
if c then
  if #p1 > 4 or #p2 > 16 or #sn > 15 or #se > 4 or #sz > 16 then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
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
-- n, e, last: the header (no state: 0, 0, 0); the entries not read yet
-- are those from position pos of sl.
local n, e, last, pos, sl = 0, 0, 0, 1, ''
if c then
  n, e, last, pos, sl = tonumber(sn), tonumber(se), tonumber(sz), at, v
  if e < 1 or e > 1000 or n < e or last >= MAXN then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
end
-- entry reads the entry at position p of the entries str: its t, k and
-- the position after it (after its comma), checking its form and order
-- (after prev, at most last).
local function entry(str, p, prev)
  local _, x, t, k = string.find(str, '^(%d+):(%d+)', p)
  if not x or #t > 16 or #k > 15 then
    return nil
  end
  t, k = tonumber(t), tonumber(k)
  if t < prev or t > last or k < 1 then
    return nil
  end
  x = x + 1
  if x <= #str then
    if string.byte(str, x) ~= 44 then -- ','
      return nil
    end
    x = x + 1
  end
  return t, k, x
end
-- Drop the entries that left the window (t + win <= now), oldest first.
local t0, k0, p0, prev = nil, nil, nil, 0
while e > 0 do
  t0, k0, p0 = entry(sl, pos, prev)
  if not t0 or k0 > n or (e == 1 and p0 <= #sl) then
    return redis.error_reply('COORD_BADSTATE limiter state is malformed')
  end
  if t0 + win > now then
    break
  end
  n, e, pos, prev = n - k0, e - 1, p0, t0
end
if e > 0 and n >= 1e15 then
  return redis.error_reply('COORD_BADSTATE limiter state is malformed')
end
-- The give-backs (m < 0) and a charge that merges into the newest entry
-- read every live entry (ts, ks, oldest first).
local full = m < 0 or (m > 0 and e > 0 and last >= now)
local ts, ks = {}, {}
if full then
  local p, pv = pos, prev
  for i = 1, e do
    local t, k, x = entry(sl, p, pv)
    if not t or (i == e) ~= (x > #sl) then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    ts[i], ks[i], p, pv = t, k, x, t
  end
end
-- A refund gives back only what the grant's own entry holds.
local rm, rj = m, nil
if op == 'r' then
  local have = 0
  for i = 1, #ts do
    if ts[i] == mk then
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
  -- Until enough of the oldest entries leave.
  local need, acc, p, pv, t, k = n + want - lim, k0, p0, t0, t0, k0
  while acc < need do
    t, k, p = entry(sl, p, pv)
    if not t then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    acc, pv = acc + k, t
  end
  wt = t + win - now
end
av = lim - n
if av < 0 then
  av = 0
end
de = now
if e > 0 then
  de = last + win
end
dm = (de + 999 - (de + 999) % 1000) / 1000
--#include rl_common.decide
if answer then
--#include rl_common.answer
end
local body
if not full then
  -- Append one entry at now (a grant, a charge).
  if n + m >= 1e15 then
    m = 1e15 - 1 - n
  end
  body = string.sub(sl, pos)
  if m > 0 then
    local x = string.format('%d:%d', now, m)
    if e > 0 then
      body = body .. ',' .. x
    else
      body = x
    end
    n, e, last = n + m, e + 1, now
  end
  -- Past limit entries: the two oldest merge into the later one's time.
  while e > lim do
    local _, k1, q = entry(body, 1, 0)
    local t2, k2, q2 = entry(body, q, 0)
    local tail = ''
    if q2 <= #body then
      tail = ',' .. string.sub(body, q2)
    end
    body = string.format('%d:%d', t2, k1 + k2) .. tail
    e = e - 1
  end
else
  if m > 0 then
    if n + m >= 1e15 then
      m = 1e15 - 1 - n
    end
    ks[#ks] = ks[#ks] + m
  else
    -- Give -rm permits back: newest first (a), or oldest first from the
    -- grant's entry (r).
    local left, i, lst, step = -rm, #ts, 1, -1
    if rj then
      i, lst, step = rj, #ts, 1
    end
    while left > 0 and i >= 1 and i <= #ts and (i - lst) * step <= 0 do
      local x = ks[i]
      if x > left then
        x = left
      end
      ks[i], left = ks[i] - x, left - x
      i = i + step
    end
  end
  local out = {}
  n, e = 0, 0
  for i = 1, #ts do
    if ks[i] > 0 then
      out[#out + 1] = string.format('%d:%d', ts[i], ks[i])
      n, e, last = n + ks[i], e + 1, ts[i]
    end
  end
  body = table.concat(out, ',')
end
de = now
if e > 0 then
  de = last + win
end
av = lim - n
if av < 0 then
  av = 0
end
dm = (de + 999 - (de + 999) % 1000) / 1000
sv = string.format('%d|%d|%d|', n, e, last) .. body
--#include rl_common.store
