-- fencing_refresh: reset the TTL of a fencing-token lease held by the
-- caller. The fencing token does not change.
--
-- KEYS[1]  lease key (hash {owner, fence[, holder]}; the owner token may
--          carry the waiter mark '+': see fencing_acquire)
-- ARGV[1]  owner token of the caller
-- ARGV[2]  new TTL in milliseconds (integer >= 1)
--
-- Reply    1  held by the caller; TTL reset
--          0  free or held by another owner; nothing changed
-- Errors   WRONGTYPE  the lease key is not a hash (nothing written)
local o = redis.call('HGET', KEYS[1], 'owner')
if o == ARGV[1] or (o and o == ARGV[1] .. '+') then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
