-- leader_proclaim: set the identity a leader's lease advertises (its
-- holder field), owner-checked, and wake the lease's waiters and
-- observers, so that readers (leader.Get, Observe, OnNewLeader) learn of
-- it at once. An elector runs it when it wins a term (the announcement of
-- the new term, with its own identity) and when its leader proclaims a new
-- identity (Term.Proclaim). The lease's owner, fence and TTL are unchanged.
--
-- KEYS[1]  lease key (the fencing lease hash {owner, fence[, holder]},
--          layout in fencing_acquire; a leader's also holds 'since')
-- ARGV[1]  owner token of the caller's term
-- ARGV[2]  identity to advertise (non-empty)
-- ARGV[3]  (the announcement of a won term only) '1': also record the
--          term's start, the server's time in milliseconds since the Unix
--          epoch, in the lease's 'since' field, unless already there (a
--          re-send keeps the first)
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
if ARGV[3] and not redis.call('HGET', KEYS[1], 'since') then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'since', t[1] * 1000 + math.floor(t[2] / 1000))
end
wake('proclaimed')
return 1
