-- lock_verify: report whether the caller holds an owner-token lock. Writes
-- nothing.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token of the caller
--
-- Reply    1  held by the caller
--          0  free or held by another owner
-- Errors   COORD_WRONGTYPE  the key holds a non-string value
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  return redis.error_reply('COORD_WRONGTYPE lock key does not hold a string')
end
if v == ARGV[1] then
  return 1
end
return 0
