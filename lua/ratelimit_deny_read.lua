-- ratelimit_deny_read: whether an identity is on a rate-limit deny list,
-- and for how long.
--
-- KEYS[1]  the deny list: a sorted set whose members are the denied
--          identities (exact bytes), each scored with the end of its
--          denial in server milliseconds since the Unix epoch, or inf for
--          a denial without end; an entry whose end has passed is not a
--          denial (ratelimit_deny_write deletes such entries); or a
--          plain set of identities (the layout before timed denials, or
--          one an operator wrote with SADD), each denied without end
-- ARGV[1]  the identity (not empty)
--
-- Reply    0 when the identity is not denied (also when the list does not
--          exist), -1 when it is denied without end, else the time left
--          of its denial in milliseconds (>= 1)
-- Writes   nothing.
-- Errors:
--   COORD_BADARG  the identity is empty
--   WRONGTYPE     the key is neither a sorted set nor a set (raised by
--                 SISMEMBER)
if ARGV[1] == '' then
  return redis.error_reply('COORD_BADARG the identity must not be empty')
end
-- ZSCORE under pcall only to tell a plain set (WRONGTYPE) apart: any
-- other error (NOPERM ...) is raised as it came.
local s = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
if type(s) == 'table' and s.err then
  if not string.find(s.err, 'WRONGTYPE', 1, true) then
    return redis.error_reply(s.err)
  end
  return -redis.call('SISMEMBER', KEYS[1], ARGV[1])
end
if not s then
  return 0
end
if s == 'inf' then
  return -1
end
local t = redis.call('TIME')
local left = tonumber(s) - (t[1] * 1000 + math.floor(t[2] / 1000))
if left < 1 then
  return 0
end
return left
