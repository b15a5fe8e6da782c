-- fencing_verify: report whether the caller holds a fencing-token lease.
-- Writes nothing.
--
-- KEYS[1]  lease key (hash {owner, fence[, holder]}; the owner token may
--          carry the waiter mark '+': see fencing_acquire)
-- ARGV[1]  owner token of the caller
--
-- Reply    1  held by the caller
--          0  free or held by another owner
-- Errors   WRONGTYPE  the lease key is not a hash (nothing written)
local o = redis.call('HGET', KEYS[1], 'owner')
if o == ARGV[1] or (o and o == ARGV[1] .. '+') then
  return 1
end
return 0
