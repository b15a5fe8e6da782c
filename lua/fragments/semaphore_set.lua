-- fragment semaphore_set: a key whose capacity was set in it
-- (semaphore_configure: SetCapacity, Drain) holds the record
-- "capacity-set" (score -capacity) instead of "capacity", and "draining"
-- (score -1) while draining. They are read only when "capacity" is
-- missing, so that a key without a capacity set costs no more than
-- before; inline code. Uses key and r (a ZMSCORE reply, 'capacity'
-- first). When r[1] is false and the key exists, r[1] becomes the
-- "capacity-set" record's score (checked by semaphore_state as a
-- capacity), fixed true and drain_rec the "draining" record's score
-- (false when absent); the script returns the COORD_BADSTATE error reply
-- when the key holds neither capacity record. Defines fixed and
-- drain_rec.
local fixed, drain_rec = false, false
if not r[1] and redis.call('EXISTS', key) == 1 then
  local set = redis.call('ZMSCORE', key, 'capacity-set', 'draining')
  if not set[1] then
    return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  r[1], fixed, drain_rec = set[1], true, set[2]
end
