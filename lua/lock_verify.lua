-- lock_verify: report whether the caller holds an owner-token lock. Writes
-- nothing.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token of the caller
--
-- Reply    1  held by the caller
--          0  free or held by another owner
-- Errors   WRONGTYPE  the key holds a non-string value
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return 1
end
return 0
