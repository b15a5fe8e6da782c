-- ratelimit_deny_write: put an identity on a rate-limit deny list or take
-- it off.
--
-- KEYS[1]  the deny list: a set whose members are the denied identities
--          (exact bytes); it has no expiry
-- ARGV[1]  the identity (not empty)
-- ARGV[2]  1 to deny it, 0 to take it off
--
-- Reply    1 when the membership changed, 0 when it already was so
-- Writes   SADD or SREM (removing the last member deletes the set).
-- Errors:
--   COORD_BADARG  the identity is empty, or ARGV[2] is neither 0 nor 1
--   WRONGTYPE     the key is not a set (raised by SADD, SREM)
-- Idempotent: a re-send finds the membership already so.
if ARGV[1] == '' or (ARGV[2] ~= '0' and ARGV[2] ~= '1') then
  return redis.error_reply('COORD_BADARG the identity must not be empty, and the flag 0 or 1')
end
if ARGV[2] == '1' then
  return redis.call('SADD', KEYS[1], ARGV[1])
end
return redis.call('SREM', KEYS[1], ARGV[1])
