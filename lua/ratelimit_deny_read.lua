-- ratelimit_deny_read: whether an identity is on a rate-limit deny list,
-- and for how long.
--
-- KEYS[1]  the deny list: a sorted set whose members are the denied
--          identities (exact bytes), each scored with the end of its
--          denial in server milliseconds since the Unix epoch, or inf for
--          a denial without end; an entry whose end has passed is not a
--          denial (ratelimit_deny_write deletes such entries)
-- ARGV[1]  the identity (not empty)
--
-- Reply    0 when the identity is not denied (also when the list does not
--          exist), -1 when it is denied without end, else the time left
--          of its denial in milliseconds (>= 1)
-- Writes   nothing.
-- Errors:
--   COORD_BADARG  the identity is empty
--   WRONGTYPE     the key is not a sorted set (raised by ZSCORE; also a
--                 plain set, the layout before denials could end)
if ARGV[1] == '' then
  return redis.error_reply('COORD_BADARG the identity must not be empty')
end
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
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
