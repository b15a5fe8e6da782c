-- ratelimit_deny_write: put an identity on a rate-limit deny list (without
-- end, or for a time) or take it off.
--
-- KEYS[1]  the deny list: a sorted set of identities scored with the end
--          of their denial in server ms, or inf (see ratelimit_deny_read);
--          it has no expiry. A plain set (the layout before timed
--          denials, or written with SADD) takes 1 and 0 (SADD, SREM) and
--          refuses t.
-- ARGV[1]  the identity (not empty)
-- ARGV[2]  1 to deny it without end, 0 to take it off, or t<ms> to deny
--          it for ms milliseconds (1 to 2^50) from the server's now: a
--          denial that already ends later (or never) is kept
--
-- Reply    1 when the identity's entry changed, 0 when it already was so
-- Writes   ZADD or ZREM (removing the last member deletes the key); a timed
--          denial (t) also deletes the entries whose end has passed.
-- Errors (raised before anything is written):
--   COORD_BADARG  the identity is empty, or ARGV[2] is malformed
--   COORD_BADSTATE  a timed denial (t) on a plain set
--   WRONGTYPE     the key is neither a sorted set nor a set (raised by
--                 SADD, SREM, SISMEMBER)
-- Idempotent: a re-send finds the entry already so (a timed denial re-sent
-- later ends a little later).
local id, f = ARGV[1], ARGV[2]
local ms
if string.byte(f) == 116 then -- t
  ms = tonumber(string.sub(f, 2))
  if not ms or ms < 1 or ms % 1 ~= 0 or ms > 1125899906842624 then
    return redis.error_reply('COORD_BADARG the denial time must be 1 to 2^50 ms')
  end
elseif f ~= '0' and f ~= '1' then
  return redis.error_reply('COORD_BADARG the flag must be 0, 1 or t<ms>')
end
if id == '' then
  return redis.error_reply('COORD_BADARG the identity must not be empty')
end
-- ZSCORE under pcall only to tell a plain set (WRONGTYPE) apart: any
-- other error (NOPERM ...) is raised as it came.
local s = redis.pcall('ZSCORE', KEYS[1], id)
if type(s) == 'table' and s.err then
  if not string.find(s.err, 'WRONGTYPE', 1, true) then
    return redis.error_reply(s.err)
  end
  if f == '1' then
    return redis.call('SADD', KEYS[1], id)
  elseif f == '0' then
    return redis.call('SREM', KEYS[1], id)
  end
  redis.call('SISMEMBER', KEYS[1], id) -- WRONGTYPE for anything but a set
  return redis.error_reply('COORD_BADSTATE the deny list is a plain set (the layout before timed denials): delete it and deny again to deny for a time')
end
if f == '0' then
  return redis.call('ZREM', KEYS[1], id)
end
if f == '1' then
  if s == 'inf' then
    return 0
  end
  redis.call('ZADD', KEYS[1], 'inf', id)
  return 1
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if s and (s == 'inf' or tonumber(s) >= now + ms) then
  return 0
end
redis.call('ZADD', KEYS[1], now + ms, id)
return 1
