-- fencing_verify: report whether the caller holds a fencing-token lease.
-- Writes nothing.
--
-- KEYS[1]  lease key (hash {owner, fence})
-- ARGV[1]  owner token of the caller
--
-- Reply    1  held by the caller
--          0  free or held by another owner
-- Errors   COORD_WRONGTYPE  the lease key is not a hash
local o = redis.pcall('HGET', KEYS[1], 'owner')
if type(o) == 'table' and o.err then
  return redis.error_reply('COORD_WRONGTYPE lease key does not hold a hash')
end
if o == ARGV[1] then
  return 1
end
return 0
