-- ratelimit_composite: one decision of a composite limiter (1 to 32
-- fixed windows, sliding windows, token buckets and GCRA limits on one
-- key, all or nothing) with the server's clock, or an adjustment of a
-- decision already made (settle a reservation, refund a grant).
--
-- KEYS[1]  the composite: a hash with the fields c (the signature: every
--          component's cfg joined with ';') and 1..n (each component's
--          state, as the one-limiter scripts store it after cfg:
--          ratelimit_fixed, _sliding, _bucket, _gcra; an
--          empty sliding window is "0|0|0|0"). The key expires when every
--          component's state is back to empty.
-- A decision grants when every component can, and then charges every
-- component; its reply's n is the fewest permits any component has
-- available, its wait the longest any component needs.
--#include rl_common.header
--#include rl_common.args
local nc, cal = #ARGV - 3, nil
if string.byte(ARGV[#ARGV]) == 64 then -- '@': calendar boundaries
  nc, cal = nc - 1, ARGV[#ARGV]
end
if nc < 1 or nc > 32 or table.concat(ARGV, ';', 4, 3 + nc) ~= ARGV[3] then
  return redis.error_reply('COORD_BADARG a composite needs 1 to 32 components and their signature')
end
local fields = {'c'}
for i = 1, nc do
  fields[i + 1] = i
end
local h = redis.call('HMGET', KEYS[1], unpack(fields))
local stored, olds = h[1] ~= false, nil
if not stored and redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('COORD_BADSTATE composite hash lacks its signature')
end
if stored and h[1] ~= ARGV[3] then
  olds = {}
  for x in string.gmatch(h[1], '[^;]+') do
    olds[#olds + 1] = x
  end
  if op == 's' then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds other settings')
  end
  if #olds ~= nc then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds another composite')
  end
end
--#include rl_common.clock

-- Every component read, moved to its settings and brought to now; av, wt
-- and dm over all of them; gives: a refund gives something back to one.
local comps, mav, mwt, mde, mdm, gives = {}, nil, nil, nil, nil, false
local fe -- a component's fixed window: its refund compares start and time
for i = 1, nc do
  local cfg, c, raw = ARGV[3 + i], nil, h[i + 1]
  if stored then
    if not raw then
      return redis.error_reply('COORD_BADSTATE composite component is missing')
    end
    c = olds and olds[i] or cfg
  end
  local al = string.byte(cfg)
  if c and string.byte(c) ~= al then
    if string.find(c, '^%a:%d') then
      return redis.error_reply('COORD_CONFIG_MISMATCH key holds another algorithm')
    end
    return redis.error_reply('COORD_BADSTATE limiter settings are malformed')
  end
  if al == 102 then -- f
    local pl, se, su, lim, win, e, u, ax
    local bs = cal and string.match(cal, ';' .. i .. '=([%d,]+)')
    if c then
      pl = string.match(c, '^f:(%d+):%d+[:%w/_+.-]*$')
      se, su = string.match(raw, '^(%d+)|(%d+)$')
      if not (pl and se) then
        return redis.error_reply('COORD_BADSTATE limiter state is malformed')
      end
    end
--#include rl_fixed.load
--#include rl_fixed.refund
--#include rl_fixed.wait
--#include rl_fixed.sum
    comps[i] = {al, lim, win, e, u, rm, ax, bs}
    gives = gives or rm ~= 0
  elseif al == 115 then -- s
    local p1, p2, p3, sn, so, sl, scs, lim, win, segs, g, n, o, l, cs
    if c then
      p1, p2, p3 = string.match(c, '^s:(%d+):(%d+):(%d+)$')
      sn, so, sl, scs = string.match(raw, '^(%d+)|(%d+)|(%d+)|([%d,]+)$')
      if not (p1 and sn) then
        return redis.error_reply('COORD_BADSTATE limiter state is malformed')
      end
    end
--#include rl_common.cfg3
--#include rl_sliding.load
--#include rl_sliding.refund
--#include rl_sliding.wait
--#include rl_sliding.sum
    comps[i] = {al, lim, win, segs, g, n, o, l, cs, rm, rj}
    gives = gives or rm ~= 0
  elseif al == 98 then -- b
    local p1, p2, p3, st, sr, lim, per, period, tk, r
    if c then
      p1, p2, p3 = string.match(c, '^b:(%d+):(%d+):(%d+)$')
      st, sr = string.match(raw, '^(%-?%d+)|(%d+)$')
      if not (p1 and st) then
        return redis.error_reply('COORD_BADSTATE limiter state is malformed')
      end
    end
--#include rl_common.cfg3
--#include rl_bucket.load
--#include rl_bucket.refund
--#include rl_bucket.wait
--#include rl_bucket.sum
    comps[i] = {al, lim, per, period, tk, r, rm}
    gives = gives or rm ~= 0
  elseif al == 103 then -- g
    local p1, p2, p3, sa, sb, x, q, d, span, a, b
    if c then
      p1, p2, p3 = string.match(c, '^g:(%d+):(%d+):(%d+)$')
      sa, sb = string.match(raw, '^(%d+)|(%d+)$')
      if not (p1 and sa) then
        return redis.error_reply('COORD_BADSTATE limiter state is malformed')
      end
    end
--#include rl_common.cfg3
--#include rl_gcra.load
--#include rl_gcra.refund
--#include rl_gcra.wait
--#include rl_gcra.sum
    comps[i] = {al, x, q, d, span, a, b, rm, rq}
    gives = gives or rm ~= 0
  else
    return redis.error_reply('COORD_BADARG malformed limiter settings')
  end
  if not mav or av < mav then
    mav = av
  end
  if wt < 0 or mwt == -1 then
    mwt = -1
  elseif not mwt or wt > mwt then
    mwt = wt
  end
  if not mde or de > mde then
    mde, mdm = de, dm
  end
end
av, wt, de, dm = mav, mwt, mde, mdm
local rm = gives and m or 0
--#include rl_common.decide
if answer then
--#include rl_common.answer
end

-- Every component charged (or given back to); av and dm over all of them.
local hset = {'c', ARGV[3]}
mav, mde, mdm = nil, nil, nil
for i = 1, nc do
  local p = comps[i]
  local al = p[1]
  if al == 102 then
    local cfg, lim, win, e, u, rm, ax, bs = ARGV[3 + i], p[2], p[3], p[4], p[5], p[6], p[7], p[8]
--#include rl_fixed.take
--#include rl_fixed.sum
  elseif al == 115 then
    local lim, win, segs, g, n, o, l, cs, rm, rj = p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]
--#include rl_sliding.take
--#include rl_sliding.sum
  elseif al == 98 then
    local lim, per, period, tk, r, rm = p[2], p[3], p[4], p[5], p[6], p[7]
--#include rl_bucket.take
--#include rl_bucket.sum
  else
    local x, q, d, span, a, b, rm, rq = p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]
--#include rl_gcra.take
--#include rl_gcra.sum
  end
  hset[#hset + 1] = i
  hset[#hset + 1] = sv
  if not mav or av < mav then
    mav = av
  end
  if not mde or de > mde then
    mde, mdm = de, dm
  end
end
av, de, dm = mav, mde, mdm
if de <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], unpack(hset))
  redis.call('PEXPIREAT', KEYS[1], dm)
end
if op == 'a' or op == 'r' then
  return {1, av}
elseif mk then
  return {av, 0, now}
end
return av
