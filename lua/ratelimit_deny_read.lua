-- ratelimit_deny_read: whether an identity is on a rate-limit deny list.
--
-- KEYS[1]  the deny list: a set whose members are the denied identities
--          (exact bytes)
-- ARGV[1]  the identity (not empty)
--
-- Reply    1 when the identity is denied, 0 when it is not (also when the
--          list does not exist)
-- Writes   nothing.
-- Errors:
--   COORD_BADARG  the identity is empty
--   WRONGTYPE     the key is not a set (raised by SISMEMBER)
if ARGV[1] == '' then
  return redis.error_reply('COORD_BADARG the identity must not be empty')
end
return redis.call('SISMEMBER', KEYS[1], ARGV[1])
