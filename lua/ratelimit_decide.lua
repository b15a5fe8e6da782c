-- ratelimit_decide: one rate-limit decision (fixed window, sliding window,
-- token bucket, GCRA, or a composite of them) with the server's clock, or
-- an adjustment of a decision already made (settle a reservation, refund a
-- grant).
--
-- Time is server microseconds: TIME's seconds * 1000000 + microseconds,
-- exact in a Lua number for centuries. Every value is an integer.
--
-- KEYS[1]  state key. One limiter: a string "<cfg>|<state>|<ring>".
--          A composite: a hash with the fields c (the signature: every
--          component's cfg joined with ';'), r (the ring) and 1..n (each
--          component's state).
--          <cfg> and <state>, by algorithm (times in server microseconds
--          unless named _ms):
--            fixed window  f:<limit>:<window_ms>      <end_ms>|<used>
--            sliding       s:<limit>:<window>:<segs>  <n>|<o>|<l>|<c_o,...,c_l>
--              (segments of g = ceil(window/segs), aligned to time; segment
--              i holds c_i permits, charged until (i+1)*g + window; n is
--              their sum, o the oldest and l the newest index kept)
--            token bucket  b:<limit>:<per>:<period>   <tokens>|<refill>
--              (tokens may be negative: debt; refill is when the current
--              refill period started)
--            GCRA          g:<burst>:<q>:<d>          <tat>|<rem>
--              (one permit every q/d microseconds; the theoretical arrival
--              time is tat + rem/d, 0 <= rem < d)
--          <ring>: the ids (8 bytes each) of the last 6 grants, settlements
--          and refunds, oldest first: a re-send of one of them is
--          recognised and not applied again.
--          The key expires when its state has returned to empty (window
--          over, bucket full, burst back, every segment returned).
-- ARGV[1]  operation. Lower case for one limiter, upper case for a
--          composite:
--            d  decide; state stored under other settings of the same
--               algorithm (the same algorithms, in order, for a composite)
--               is migrated to these settings first
--            s  decide, strict: other settings are an error
--            a  adjust: charge ARGV[2] permits (negative: give them back)
--            r  refund: give ARGV[2] permits back to a grant whose id is
--               ARGV[3]'s second half, if the ring still holds it
--            t  decide without the fast paths (tests)
-- ARGV[2]  permits (integer; >= 0 for decisions, >= 1 for refunds); 0
--          probes without consuming
-- ARGV[3]  this call's id (8 bytes; empty for a probe); for r, this call's
--          id followed by the refunded grant's id
-- ARGV[4]  one limiter: its cfg; a composite: its signature
-- ARGV[5]  one limiter: the window in milliseconds (fixed window), or the
--          key's TTL in milliseconds after a grant (at least the time
--          until the state is back to empty); a composite: the first
--          component's cfg, then one argument per component (1 to 32)
--
-- Reply    a decision:
--            n          (an integer >= 0) granted (a probe: one permit is
--                       free); n permits are available after it. A
--                       re-sent grant is answered the same way, with what
--                       is available now, and consumes nothing.
--            {n, wait}  refused; n permits are available, wait is the
--                       time in microseconds (>= 1) until the request
--                       could be granted, -1 when never (more permits
--                       than a component's capacity)
--          an adjustment (a, r): {applied, n}; applied is 1 (also for a
--          re-send), or 0 for a refund whose grant is no longer in the ring
-- Writes   a grant, an adjustment, an applied refund, a migration (with
--          the grant): the whole state, with an expiry. A refusal, a probe
--          or a re-send writes nothing, except an expiry on a key that has
--          none (after PERSIST or RESTORE): PEXPIREAT NX at the time its
--          state returns to empty; a key whose state is empty already is
--          deleted.
-- Errors (raised before anything is written):
--   COORD_BADARG            an argument is malformed or out of range
--   WRONGTYPE               the key is not a string (one limiter) or a hash
--                           (a composite) (raised by GET, HMGET)
--   COORD_CONFIG_MISMATCH   the key holds another algorithm, another
--                           composite structure, or (s) other settings
--   COORD_BADSTATE          the stored state is malformed
-- Idempotent under a re-send with the same id while the ring holds it: at
-- most 5 other grants, settlements or refunds on the key in between.
local op = ARGV[1]
local permits, ids = tonumber(ARGV[2]), ARGV[3]

-- Fast paths: one limiter, settings as stored, a grant of permits >= 1
-- that is not a re-send. One pattern reads the stored settings and state;
-- settings equal to the caller's are the same Lua string. Anything else
-- continues below.
if (op == 'd' or op == 's') and permits and permits >= 1 and permits % 1 == 0 and #ids == 8 then
  local cfg = ARGV[4]
  -- ring returns the ids to keep (the last 5) when the stored value v,
  -- read with settings c and its ring at rs, is under the caller's
  -- settings with a well-formed ring not holding this call's id; else nil.
  local function ring(v, c, rs)
    if c == cfg and (#v + 1 - rs) % 8 == 0 and not string.find(v, ids, rs, true) then
      local s = #v - 39
      if s < rs then s = rs end
      return string.sub(v, s)
    end
  end
  local alg = string.byte(cfg)
  local v = redis.call('GET', KEYS[1])
  if alg == 102 then -- f
    local c, limit, e, u, rs
    if v then
      c, limit, e, u, rs = string.match(v, '^(f:(%d+):%d+)|(%d+)|(%d+)|()')
      local tail = ring(v, c, rs)
      if tail and u + permits <= tonumber(limit) then
        u = u + permits
        redis.call('SET', KEYS[1], cfg .. '|' .. e .. '|' .. u .. '|' .. tail .. ids, 'PXAT', e)
        return limit - u
      end
    else
      local w
      limit, w = string.match(cfg, '^f:(%d+):(%d+)$')
      if limit and permits <= tonumber(limit) then
        local t = redis.call('TIME')
        e = string.format('%d', t[1] * 1000 + (t[2] - t[2] % 1000) / 1000 + w)
        redis.call('SET', KEYS[1], cfg .. '|' .. e .. '|' .. permits .. '|' .. ids, 'PXAT', e)
        return limit - permits
      end
    end
  elseif alg == 103 then -- g
    local c, x, q, d, a, b, rs, tail
    if v then
      c, x, q, d, a, b, rs = string.match(v, '^(g:(%d+):(%d+):(%d+))|(%d+)|(%d+)|()')
      tail = ring(v, c, rs)
    else
      x, q, d = string.match(cfg, '^g:(%d+):(%d+):(%d+)$')
      tail = x and ''
    end
    if tail then
      local t = redis.call('TIME')
      local now = t[1] * 1000000 + t[2]
      q, d, a, b = tonumber(q), tonumber(d), tonumber(a), tonumber(b)
      local span = x * q
      if not a or a < now then a, b = now, 0 end
      local w = b + permits * q
      a, b = a + (w - w % d) / d, w % d
      local debt = (a - now) * d + b
      if debt <= span then
        redis.call('SET', KEYS[1], cfg .. string.format('|%d|%d|', a, b) .. tail .. ids, 'PX', ARGV[5])
        w = span - debt
        return (w - w % q) / q
      end
    end
  elseif alg == 98 then -- b
    local c, limit, per, period, tk, r, rs, tail
    if v then
      c, limit, per, period, tk, r, rs = string.match(v, '^(b:(%d+):(%d+):(%d+))|(%-?%d+)|(%d+)|()')
      tail = ring(v, c, rs)
    else
      limit, per, period = string.match(cfg, '^b:(%d+):(%d+):(%d+)$')
      tail = limit and ''
    end
    if tail then
      local t = redis.call('TIME')
      local now = t[1] * 1000000 + t[2]
      limit, per, period, tk, r = tonumber(limit), tonumber(per), tonumber(period), tonumber(tk), tonumber(r)
      if not tk then
        tk, r = limit, now
      elseif tk < limit and now > r then
        local n = (now - r - (now - r) % period) / period
        local fill = limit - tk + per - 1
        if n >= (fill - fill % per) / per then
          tk = limit
        else
          tk, r = tk + n * per, r + n * period
        end
      end
      if tk >= limit then tk, r = limit, now end
      if tk >= permits then
        tk = tk - permits
        redis.call('SET', KEYS[1], cfg .. string.format('|%d|%d|', tk, r) .. tail .. ids, 'PX', ARGV[5])
        return tk
      end
    end
  elseif alg == 115 then -- s
    local c, limit, window, segs, n, o, l, pre, cnt, rs
    if v then
      c, limit, window, segs, n, o, l, pre, cnt, rs = string.match(v, '^(s:(%d+):(%d+):(%d+))|(%d+)|(%d+)|(%d+)|([%d,]-)(%d+)|()')
    else
      limit, window, segs = string.match(cfg, '^s:(%d+):(%d+):(%d+)$')
    end
    if limit then
      limit, window, segs = tonumber(limit), tonumber(window), tonumber(segs)
      local g = (window + segs - 1 - (window + segs - 1) % segs) / segs
      if not v then
        if permits <= limit then
          local t = redis.call('TIME')
          local now = t[1] * 1000000 + t[2]
          local k = string.format('%d', (now - now % g) / g)
          redis.call('SET', KEYS[1], cfg .. '|' .. permits .. '|' .. k .. '|' .. k .. '|' .. permits .. '|' .. ids, 'PX', ARGV[5])
          return limit - permits
        end
      elseif ring(v, c, rs) then
        local t = redis.call('TIME')
        local now = t[1] * 1000000 + t[2]
        local k, cut = (now - now % g) / g, now - window
        cut = (cut - cut % g) / g
        n, l = n + permits, tonumber(l)
        if n <= limit and tonumber(o) >= cut and (k == l or k == l + 1) then
          if k == l then
            cnt = string.format('%s%d|', pre, cnt + permits)
          else
            cnt = string.format('%s%s,%d|', pre, cnt, permits)
          end
          redis.call('SET', KEYS[1], cfg .. string.format('|%d|%s|%d|', n, o, k) .. cnt .. ring(v, c, rs) .. ids, 'PX', ARGV[5])
          return limit - n
        end
      end
    end
  end
end

-- The general path: every operation, both layouts.
local RING = 6 -- ids kept in the ring
local comp = op == 'D' or op == 'S' or op == 'A' or op == 'R' or op == 'T'
local kind = string.lower(op)
if not (kind == 'd' or kind == 's' or kind == 'a' or kind == 'r' or kind == 't') then
  return redis.error_reply('COORD_BADARG unknown operation')
end
if not permits or permits % 1 ~= 0 or (kind ~= 'a' and permits < 0) or (kind == 'r' and permits < 1)
    or math.abs(permits) >= 2147483648 then
  return redis.error_reply('COORD_BADARG permits must be an integer in range')
end
local id, gid = ids, nil
if kind == 'r' then
  if #ids ~= 16 then
    return redis.error_reply('COORD_BADARG a refund needs its id and the grant id (8 bytes each)')
  end
  id, gid = string.sub(ids, 1, 8), string.sub(ids, 9)
elseif #ids ~= 8 and not (#ids == 0 and permits == 0 and kind ~= 'a') then
  return redis.error_reply('COORD_BADARG the id must be 8 bytes (empty only for a probe)')
end

local MAXN = 9007199254740992

-- int reads a non-negative integer (or, with neg, any integer) below 2^53.
local function int(s, neg)
  local x = tonumber(s)
  if not x or x % 1 ~= 0 or x >= MAXN or x <= -MAXN or (x < 0 and not neg) then
    return nil
  end
  return x
end

-- params reads a cfg into a table; nil when malformed.
local function params(cfg)
  local a = string.sub(cfg, 1, 2)
  local p = {cfg = cfg, a = string.sub(a, 1, 1)}
  local x, y, z = string.match(cfg, '^%a:(%d+):(%d+):?(%d*)$')
  x, y, z = int(x), int(y), int(z)
  if not (x and y) or x < 1 or y < 1 then
    return nil
  end
  if a == 'f:' and not z then
    p.cap, p.limit, p.window = x, x, y
  elseif a == 's:' and z and z >= 1 and z <= 1024 then
    p.cap, p.limit, p.window, p.segs = x, x, y, z
    p.g = (y + z - 1 - (y + z - 1) % z) / z
  elseif a == 'b:' and z and z >= 1 then
    p.cap, p.limit, p.per, p.period = x, x, y, z
  elseif a == 'g:' and z and z >= 1 then
    p.cap, p.burst, p.q, p.d = x, x, y, z
    p.span = x * y
  else
    return nil
  end
  return p
end

-- parse reads a state string under p; nil when malformed.
local function parse(p, s)
  local st = {}
  if p.a == 's' then
    local n, o, l, cs = string.match(s, '^(%d+)|(%d+)|(%d+)|([%d,]+)$')
    n, o, l = int(n), int(o), int(l)
    if not (n and o and l) or l < o or l - o > 4096 then
      return nil
    end
    local c, sum = {}, 0
    for x in string.gmatch(cs, '[^,]+') do
      x = int(x)
      if not x then
        return nil
      end
      c[#c + 1] = x
      sum = sum + x
    end
    if #c ~= l - o + 1 or sum ~= n then
      return nil
    end
    st.n, st.o, st.c = n, o, c
    return st
  end
  local x, y = string.match(s, '^(%-?%d+)|(%-?%d+)$')
  x, y = int(x, p.a == 'b'), int(y)
  if not (x and y) then
    return nil
  end
  if p.a == 'f' then
    st.e, st.u = x, y
  elseif p.a == 'b' then
    if x > p.limit then
      return nil
    end
    st.t, st.r = x, y
  else
    if y >= p.d then
      return nil
    end
    st.a, st.b = x, y
  end
  return st
end

local function fresh(p, now)
  if p.a == 'f' then
    return {e = 0, u = 0}
  elseif p.a == 's' then
    return {n = 0, c = {}}
  elseif p.a == 'b' then
    return {t = p.limit, r = now}
  end
  return {a = now, b = 0}
end

-- refill settles the whole refill periods of a token bucket.
local function refill(p, st, now)
  if st.t < p.limit and now > st.r then
    local n = (now - st.r - (now - st.r) % p.period) / p.period
    local fill = p.limit - st.t + p.per - 1
    if n >= (fill - fill % p.per) / p.per then
      st.t = p.limit
    else
      st.t, st.r = st.t + n * p.per, st.r + n * p.period
    end
  end
  if st.t >= p.limit then
    st.t, st.r = p.limit, now
  end
end

-- norm brings a state to now: an ended window is empty, returned
-- segments are dropped, whole refill periods are added, a past arrival
-- time is now.
local function norm(p, st, now)
  if p.a == 'f' then
    if st.e * 1000 <= now then
      st.e, st.u = 0, 0
    end
  elseif p.a == 's' then
    if not st.o then
      return
    end
    local cut = now - p.window
    cut = (cut - cut % p.g) / p.g
    local c = st.c
    while st.o < cut and #c > 0 do
      st.n = st.n - table.remove(c, 1)
      st.o = st.o + 1
    end
    while #c > 0 and c[1] == 0 do
      table.remove(c, 1)
      st.o = st.o + 1
    end
    if #c == 0 then
      st.n, st.o = 0, nil
    end
  elseif p.a == 'b' then
    refill(p, st, now)
  elseif st.a < now then
    st.a, st.b = now, 0
  end
end

local function debt(p, st, now)
  return (st.a - now) * p.d + st.b
end

-- avail is the number of whole permits free now (0 .. capacity).
local function avail(p, st, now)
  local x
  if p.a == 'f' then
    x = p.limit - st.u
  elseif p.a == 's' then
    x = p.limit - st.n
  elseif p.a == 'b' then
    x = st.t
  else
    x = p.span - debt(p, st, now)
    x = (x - x % p.q) / p.q
  end
  if x < 0 then
    return 0
  end
  if x > p.cap then
    return p.cap
  end
  return x
end

-- wait is the time until want permits are free: 0 now, -1 never.
local function wait(p, st, now, want)
  if want > p.cap then
    return -1
  end
  if p.a == 'g' then
    local x = debt(p, st, now) + want * p.q - p.span
    if x <= 0 then
      return 0
    end
    return (x + p.d - 1 - (x + p.d - 1) % p.d) / p.d
  end
  local have = avail(p, st, now)
  if have >= want then
    return 0
  end
  if p.a == 'f' then
    return st.e * 1000 - now
  elseif p.a == 's' then
    local need, freed = want - have, 0
    for j = 1, #st.c do
      freed = freed + st.c[j]
      if freed >= need then
        return (st.o + j) * p.g + p.window - now
      end
    end
    return (st.o + #st.c) * p.g + p.window - now
  end
  local short = want - st.t + p.per - 1
  return st.r + (short - short % p.per) / p.per * p.period - now
end

-- take consumes m permits (a charge: the state may go past the limit).
local function take(p, st, now, m)
  if p.a == 'f' then
    if st.e == 0 then
      st.e = (now - now % 1000) / 1000 + p.window
    end
    st.u = st.u + m
  elseif p.a == 's' then
    local k = (now - now % p.g) / p.g
    local c = st.c
    if not st.o then
      st.o, c[1] = k, 0
    end
    local l = st.o + #c - 1
    if k < l then
      k = l -- the clock went back: never charge an older segment
    end
    for _ = l + 1, k do
      c[#c + 1] = 0
    end
    c[#c] = c[#c] + m
    st.n = st.n + m
  elseif p.a == 'b' then
    st.t = st.t - m
  else
    local x = st.b + m * p.q
    st.a, st.b = st.a + (x - x % p.d) / p.d, x % p.d
  end
end

-- give returns m permits (never below empty).
local function give(p, st, now, m)
  if p.a == 'f' then
    st.u = math.max(0, st.u - m)
  elseif p.a == 's' then
    local c = st.c
    for j = #c, 1, -1 do
      local x = math.min(c[j], m)
      c[j], m, st.n = c[j] - x, m - x, st.n - x
    end
    norm(p, st, now)
  elseif p.a == 'b' then
    st.t = st.t + m
    if st.t >= p.limit then
      st.t, st.r = p.limit, now
    end
  else
    local x = math.max(0, debt(p, st, now) - m * p.q)
    st.a, st.b = now + (x - x % p.d) / p.d, x % p.d
  end
end

-- done is when the state is back to empty, in microseconds (<= now: it
-- is empty already).
local function done(p, st, now)
  if p.a == 'f' then
    return st.e * 1000
  elseif p.a == 's' then
    if not st.o then
      return now
    end
    return (st.o + #st.c) * p.g + p.window
  elseif p.a == 'b' then
    if st.t >= p.limit then
      return now
    end
    local short = p.limit - st.t + p.per - 1
    return st.r + (short - short % p.per) / p.per * p.period
  end
  if st.b > 0 then
    return st.a + 1
  end
  return st.a
end

local function text(p, st)
  if p.a == 'f' then
    return string.format('%d|%d', st.e, st.u)
  elseif p.a == 's' then
    if not st.o then
      return '0|0|0|0' -- empty (a composite keeps its other components)
    end
    return string.format('%d|%d|%d|', st.n, st.o, st.o + #st.c - 1) .. table.concat(st.c, ',')
  elseif p.a == 'b' then
    return string.format('%d|%d', st.t, st.r)
  end
  return string.format('%d|%d', st.a, st.b)
end

-- migrate applies the settings p to a state st stored under the settings
-- o of the same algorithm.
local function migrate(o, p, st, now)
  if p.a == 'f' then
    return st -- the count and the window's end stay; the width applies next
  elseif p.a == 's' then
    -- New segment indexes fall within a few windows of now: keep them as
    -- offsets from a base (no sparse integer keys).
    local k = (now - now % p.g) / p.g
    local base = k - p.segs - 3
    local acc, lo, hi = {}, nil, nil
    for i = 1, #st.c do
      local x = st.c[i]
      local e = (st.o + i) * o.g -- the old segment's end
      if x > 0 and e + o.window > now and e + p.window > now then
        local j = (e + p.g - 1 - (e + p.g - 1) % p.g) / p.g - 1
        if j > k then
          j = k -- its permits were taken by now
        end
        if j < base then
          j = base -- cannot happen for a live segment; stay bounded
        end
        acc[j - base] = (acc[j - base] or 0) + x
        if not lo or j < lo then lo = j end
        if not hi or j > hi then hi = j end
      end
    end
    local ns = {n = 0, c = {}}
    if lo then
      ns.o = lo
      for j = lo, hi do
        local x = acc[j - base] or 0
        ns.c[#ns.c + 1] = x
        ns.n = ns.n + x
      end
    end
    return ns
  elseif p.a == 'b' then
    refill(o, st, now) -- whole periods at the old rate
    if st.t >= p.limit then
      st.t, st.r = p.limit, now
    end
    return st
  end
  if st.a < now then
    st.a, st.b = now, 0
  end
  local x = debt(o, st, now) -- in 1/o.d microseconds; x / o.q permits
  local q, r = (x - x % o.q) / o.q, x % o.q
  local u = q * p.q + (r * p.q + o.q - 1 - (r * p.q + o.q - 1) % o.q) / o.q
  st.a, st.b = now + (u - u % p.d) / p.d, u % p.d
  return st
end

-- The caller's settings.
local cfgs = {}
if comp then
  for i = 5, #ARGV do
    cfgs[#cfgs + 1] = ARGV[i]
  end
  if #cfgs < 1 or #cfgs > 32 or table.concat(cfgs, ';') ~= ARGV[4] then
    return redis.error_reply('COORD_BADARG a composite needs 1 to 32 components and their signature')
  end
else
  cfgs[1] = ARGV[4]
end
local ps = {}
for i, c in ipairs(cfgs) do
  ps[i] = params(c)
  if not ps[i] then
    return redis.error_reply('COORD_BADARG malformed limiter settings')
  end
end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]

-- Load the stored state (migrated to the caller's settings).
local key = KEYS[1]
local sts, ring, stored = {}, '', false
local olds -- the stored cfgs when they differ
local raw = {}
if comp then
  local fields = {'c', 'r'}
  for i = 1, #ps do
    fields[#fields + 1] = tostring(i)
  end
  local h = redis.call('HMGET', key, unpack(fields))
  if h[1] then
    stored = true
    ring = h[2] or ''
    if h[1] ~= ARGV[4] then
      olds = {}
      for c in string.gmatch(h[1], '[^;]+') do
        olds[#olds + 1] = c
      end
    end
    for i = 1, #ps do
      raw[i] = h[i + 2]
    end
  elseif redis.call('EXISTS', key) == 1 then
    return redis.error_reply('COORD_BADSTATE composite hash lacks its signature')
  end
else
  local v = redis.call('GET', key)
  if v then
    stored = true
    local c, rest = string.match(v, '^([^|]*)|(.*)$')
    if not c then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    local nf = 2
    if string.sub(c, 1, 1) == 's' then
      nf = 4
    end
    local pos = 0
    for _ = 1, nf do
      pos = string.find(rest, '|', pos + 1, true)
      if not pos then
        return redis.error_reply('COORD_BADSTATE limiter state is malformed')
      end
    end
    raw[1], ring = string.sub(rest, 1, pos - 1), string.sub(rest, pos + 1)
    if c ~= cfgs[1] then
      olds = {c}
    end
  end
end
if #ring % 8 ~= 0 then
  return redis.error_reply('COORD_BADSTATE limiter ring is malformed')
end
if olds then
  if kind == 's' then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds other settings')
  end
  if #olds ~= #ps then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds another composite')
  end
end
for i, p in ipairs(ps) do
  local st
  if not stored or not raw[i] then
    if stored then
      return redis.error_reply('COORD_BADSTATE composite component is missing')
    end
    st = fresh(p, now)
  elseif olds and olds[i] ~= p.cfg then
    local o = params(olds[i])
    if not o then
      if string.match(olds[i], '^%a:[%d:]+$') then
        return redis.error_reply('COORD_CONFIG_MISMATCH key holds another limiter')
      end
      return redis.error_reply('COORD_BADSTATE limiter settings are malformed')
    end
    if o.a ~= p.a then
      return redis.error_reply('COORD_CONFIG_MISMATCH key holds another algorithm')
    end
    st = parse(o, raw[i])
    if not st then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
    norm(o, st, now)
    st = migrate(o, p, st, now)
  else
    st = parse(p, raw[i])
    if not st then
      return redis.error_reply('COORD_BADSTATE limiter state is malformed')
    end
  end
  norm(p, st, now)
  sts[i] = st
end

local function minavail()
  local m
  for i, p in ipairs(ps) do
    local x = avail(p, sts[i], now)
    if not m or x < m then
      m = x
    end
  end
  return m
end

local function until_empty()
  local x = now
  for i, p in ipairs(ps) do
    local e = done(p, sts[i], now)
    if e > x then
      x = e
    end
  end
  return x
end

local function ms(us)
  return string.format('%d', (us + 999 - (us + 999) % 1000) / 1000)
end

-- keep gives a key without an expiry (PERSIST, RESTORE) the one its state
-- calls for; a key whose state is empty already goes.
local function keep()
  if stored then
    local x = until_empty()
    if x <= now then
      redis.call('DEL', key) -- nothing left to remember
    else
      redis.call('PEXPIREAT', key, ms(x), 'NX')
    end
  end
end

-- inring finds an 8-byte id at an 8-byte boundary of the ring.
local function inring(x)
  local at = string.find(ring, x, 1, true)
  while at do
    if at % 8 == 1 then
      return at
    end
    at = string.find(ring, x, at + 1, true)
  end
  return nil
end

local function write()
  if #ring > 8 * RING then
    ring = string.sub(ring, -8 * RING)
  end
  local x = until_empty()
  if x <= now then
    redis.call('DEL', key) -- back to empty: nothing to keep
    return
  end
  if comp then
    local args = {'c', ARGV[4], 'r', ring}
    for i, p in ipairs(ps) do
      args[#args + 1] = tostring(i)
      args[#args + 1] = text(p, sts[i])
    end
    redis.call('HSET', key, unpack(args))
    redis.call('PEXPIREAT', key, ms(x))
  else
    redis.call('SET', key, cfgs[1] .. '|' .. text(ps[1], sts[1]) .. '|' .. ring, 'PXAT', ms(x))
  end
end

if id ~= '' and inring(id) then
  keep() -- a re-send: answered, not applied again
  if kind == 'a' or kind == 'r' then
    return {1, minavail()}
  end
  return minavail()
end

if kind == 'a' then
  for i, p in ipairs(ps) do
    if permits >= 0 then
      take(p, sts[i], now, permits)
    else
      give(p, sts[i], now, -permits)
    end
  end
  ring = ring .. id
  write()
  return {1, minavail()}
end

if kind == 'r' then
  local at = inring(gid)
  if not at then
    keep()
    return {0, minavail()}
  end
  for i, p in ipairs(ps) do
    give(p, sts[i], now, permits)
  end
  ring = string.sub(ring, 1, at - 1) .. string.sub(ring, at + 8) .. id
  write()
  return {1, minavail()}
end

-- A decision.
local want = permits
if want == 0 then
  want = 1
end
local longest = 0
for i, p in ipairs(ps) do
  local w = wait(p, sts[i], now, want)
  if w < 0 then
    longest = -1
    break
  end
  if w > longest then
    longest = w
  end
end
if longest ~= 0 then
  keep()
  return {minavail(), longest}
end
if permits == 0 then
  keep()
  return minavail()
end
for i, p in ipairs(ps) do
  take(p, sts[i], now, permits)
end
ring = ring .. id
write()
return minavail()
