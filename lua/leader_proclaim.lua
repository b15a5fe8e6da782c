-- leader_proclaim: set the identity a leader's lease advertises (its
-- holder field), owner-checked, and wake the lease's waiters and
-- observers, so that readers (leader.Get, Observe, OnNewLeader) learn of
-- it at once. An elector runs it when it wins a term (the announcement of
-- the new term, with its own identity) and when its leader proclaims a new
-- identity (Term.Proclaim). The lease's owner, fence and TTL are unchanged.
--
-- KEYS[1]  lease key (the fencing lease hash {owner, fence[, holder]},
--          layout in fencing_acquire)
-- ARGV[1]  owner token of the caller's term
-- ARGV[2]  identity to advertise (non-empty)
--
-- Reply    1  the lease is the caller's: the holder field is ARGV[2] and
--             waiters are notified on the lease key's channel (best
--             effort). A re-send gets 1 again (the same write).
--          0  nothing changed: no lease, or another owner's (the term has
--             ended: expired or taken over)
-- Errors (raised before anything is written):
--   WRONGTYPE  the lease key is not a hash (raised by HGET)
--#include notify
local o = redis.call('HGET', KEYS[1], 'owner')
if not o or (o ~= ARGV[1] and o ~= ARGV[1] .. '+') then
  return 0
end
redis.call('HSET', KEYS[1], 'holder', ARGV[2])
wake('proclaimed')
return 1
