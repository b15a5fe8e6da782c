-- fragment rl_common: what the rate-limit decision scripts
-- (ratelimit_fixed, _sliding, _bucket, _gcra, _composite) share, in
-- sections. The scripts name their values alike: op, permits, mk (a
-- grant's mark: to reply (D, S), or a refund's), now (server µs, nil until
-- read), av (permits free), wt (µs
-- until want permits are free: 0 now, -1 never), de and dm (when the
-- state is back to empty, in µs, and in ms rounded up; de may be nil where
-- the clock was not read) and sv (the state's text).
--#section header
-- rl_common.header: the arguments, replies and errors every decision
-- script shares.
-- ARGV[1]  operation:
--            d      decide; state stored under other settings of the same
--                   algorithm (a composite: the same algorithms, in
--                   order) is moved to these settings first
--            s      decide, strict: other settings are an error
--            D, S   d, s, and a grant replies its mark, which a refund of
--                   it names: a fixed window's end (ms; ratelimit_fixed),
--                   or the server's time of the grant (µs; the others and
--                   a composite)
--            a      adjust: charge ARGV[2] permits (negative: give them
--                   back): a reservation's settlement
--            r<mark> refund: give ARGV[2] permits of the grant whose mark
--                   this is back, as far as the state provably still
--                   holds them: a fixed window only in the same window (a
--                   composite's: one that started at or before the
--                   grant); a token bucket only when no refill period
--                   began since the grant; GCRA only what has not come
--                   back by itself (the grant's charge less the time
--                   since); a sliding window only from the grant's own
--                   segment while it is in the window; a composite each
--                   component by its rule
-- ARGV[2]  permits (integer; >= 0 for decisions, >= 1 for refunds); 0
--          probes without consuming
-- ARGV[3]  the settings (cfg; a composite: its signature, every
--          component's cfg joined with ';', and each component's cfg in
--          ARGV[4], ARGV[5], ... in order, 1 to 32, then, when a fixed
--          component has a calendar period, "@;<i>=<b0>,<b1>,<b2>,<b3>..."
--          with the boundaries of each such component i (ratelimit_fixed
--          takes its own in ARGV[4]))
-- Times are server microseconds (TIME's seconds * 1000000 +
-- microseconds) unless named _ms; every value is an integer below 2^53.
-- Reply    a decision:
--            n          (an integer >= 0) granted (a probe: one permit is
--                       free); n permits are available after it
--            {n, 0, mark}  granted (D, S, permits >= 1): as n, with the
--                       grant's mark
--            {n, wait}  refused; n permits are available, wait is the
--                       time in microseconds (>= 1) until the request
--                       could be granted, -1 when never (more permits
--                       than the capacity)
--          an adjustment (a, r): {applied, n}; applied is 1, or for a
--          refund 0 when the rule above gave nothing back
-- Writes   a grant, an adjustment, a refund that gives something back, a
--          move to other settings (with the grant): the whole state,
--          expiring when it is back to empty (a state that is empty
--          already: the key is deleted). A refusal, a probe or a refund
--          that gives nothing back writes nothing, except an expiry on a
--          key that has none (after PERSIST or RESTORE): PEXPIREAT NX at
--          the time its state returns to empty; a key whose state is
--          empty already is deleted.
-- Errors (raised before anything is written):
--   COORD_BADARG            an argument is malformed or out of range, or
--                           an adjustment (a, r) would take the state out
--                           of its range (a GCRA arrival time or a
--                           bucket's refill of its debt at 2^53 µs or
--                           beyond, a sliding window's total at 2^53; a
--                           fixed window's count stops below 10^14)
--   WRONGTYPE               the key is not a string (a composite: not a
--                           hash) (raised by GET, HMGET)
--   COORD_CONFIG_MISMATCH   the key holds another algorithm, another
--                           composite structure, or (s) other settings
--   COORD_CLOCK             a fixed window of a calendar period would
--                           start, and the server's time is outside the
--                           boundaries sent
--   COORD_BADSTATE          the stored state is malformed
-- Not idempotent: a second run consumes again. The library sends every
-- call at most once (it never re-sends one that may have run; a lost
-- reply is an ambiguous error for the caller).
--#section args
-- rl_common.args: the call (ARGV[1..2]), checked.
local op, permits, mk = ARGV[1], tonumber(ARGV[2]), nil
if #op > 1 then
  mk = tonumber(string.sub(op, 2))
  op = string.sub(op, 1, 1)
  if op ~= 'r' or not mk or mk < 0 or mk % 1 ~= 0 or mk >= 9007199254740992 then
    return redis.error_reply('COORD_BADARG unknown operation')
  end
elseif op == 'D' or op == 'S' then
  op, mk = string.lower(op), true
elseif op ~= 'd' and op ~= 's' and op ~= 'a' then
  return redis.error_reply('COORD_BADARG unknown operation')
end
if not permits or permits % 1 ~= 0 or permits >= 2147483648 or permits <= -2147483648
    or (op ~= 'a' and permits < 0) or (op == 'r' and permits < 1) then
  return redis.error_reply('COORD_BADARG permits must be an integer in range')
end
-- want: the permits a decision asks about (a probe: one); m: the permits
-- to charge (negative: to give back) once the call is to be applied.
local want, m = permits, permits
if want < 1 then
  want = 1
end
if op == 'r' then
  m = -permits
end
local MAXN = 9007199254740992 -- 2^53: every stored number stays below
local now, av, wt, de, dm, sv, gm
--#section one
-- rl_common.one: a single limiter's key: its value v (stored: whether
-- there is one) and the caller's settings cfg.
local v = redis.call('GET', KEYS[1])
local stored, cfg = v ~= false, ARGV[3]
--#section foreign
-- rl_common.foreign: a stored value v that this script's pattern did not
-- read (c: nil) is another limiter's, or garbage.
if stored and not c then
  if string.find(v, '^%a:%d[^|]*|') and string.byte(v) ~= string.byte(cfg) then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds another algorithm')
  end
  return redis.error_reply('COORD_BADSTATE limiter state is malformed')
end
--#section clock
-- rl_common.clock: now, the server's clock (TIME) in microseconds.
local t = redis.call('TIME')
now = t[1] * 1000000 + t[2]
--#section cfg3
-- rl_common.cfg3: settings of three numbers ("<letter>:<n1>:<n2>:<n3>",
-- each 1 to 2^53 - 1): o1, o2, o3 the stored settings' (read as p1, p2, p3
-- under c, the stored cfg; nil: no state), n1, n2, n3 the caller's (cfg,
-- for the algorithm al; when it is the stored cfg, the stored numbers:
-- cfg is not read again). A strict decision (s) under other stored
-- settings is refused.
local o1, o2, o3, n1, n2, n3
if c then
  o1, o2, o3 = tonumber(p1), tonumber(p2), tonumber(p3)
  if not (o1 and o2 and o3) or o1 < 1 or o2 < 1 or o3 < 1 or o1 >= MAXN or o2 >= MAXN or o3 >= MAXN then
    return redis.error_reply('COORD_BADSTATE limiter settings are malformed')
  end
end
if c == cfg then
  n1, n2, n3 = o1, o2, o3
else
  if c and op == 's' then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds other settings')
  end
  n1, n2, n3 = string.match(cfg, '^%a:(%d+):(%d+):(%d+)$')
  n1, n2, n3 = tonumber(n1), tonumber(n2), tonumber(n3)
  if string.byte(cfg) ~= al or not n1 or n1 < 1 or n2 < 1 or n3 < 1 or n1 >= MAXN or n2 >= MAXN or n3 >= MAXN then
    return redis.error_reply('COORD_BADARG malformed limiter settings')
  end
end
--#section decide
-- rl_common.decide: whether the call is answered without applying
-- anything (answer, true): a refused decision, a probe, and a refund that
-- gives nothing back (rm, the permits the algorithm's refund section
-- lets it give back: 0).
local answer = ((op == 'd' or op == 's') and (wt ~= 0 or permits == 0)) or (op == 'r' and rm == 0)
--#section answer
-- rl_common.answer: answers a call decide found is not to be applied
-- (with av, wt, de and dm); a key without an expiry (PERSIST, RESTORE) gets
-- the one its state calls for, and a key whose state is empty already
-- goes.
if stored then
  if de and de <= now then
    redis.call('DEL', KEYS[1])
  else
    redis.call('PEXPIREAT', KEYS[1], dm, 'NX')
  end
end
if op == 'r' then
  return {0, av}
elseif wt ~= 0 then
  return {av, wt}
end
return av
--#section store
-- rl_common.store: writes a single limiter's key, "<cfg>|<sv>", expiring
-- when its state is back to empty (a state that is empty already: the
-- key goes), and answers (a grant under D, S: with its mark, gm, or now).
if de and de <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], cfg .. '|' .. sv, 'PXAT', dm)
end
if op == 'a' or op == 'r' then
  return {1, av}
elseif mk then
  return {av, 0, gm or now}
end
return av
