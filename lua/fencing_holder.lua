-- fencing_holder: report who holds a fencing-token lease, with its fencing
-- token and remaining TTL (fencing.Mutex.Holder reads it;
-- fencing.Mutex.Adopt compares the owner token). Writes nothing; the
-- counter key is not read.
--
-- KEYS[1]  lease key (a hash {owner, fence[, holder]} written by
--          fencing_acquire; expires)
--
-- Reply    false                   free: the key does not exist, or holds
--                                  a tombstone (fencing_abandon: {owner}
--                                  alone, ending with '!': a list of one
--                                  to 8 abandoned tokens, each followed
--                                  by '!'; read as free unchecked)
--          {owner, fence, pttl_ms} owner is the owner field as stored (the
--                                  owner token, with the waiter mark '+'
--                                  when a contended attempt found it held:
--                                  the client strips it and checks the
--                                  token's shape); fence is the fencing
--                                  token as a decimal string (exact over
--                                  int64); pttl_ms is the key's remaining
--                                  TTL in ms (>= 0: 0 in its last
--                                  millisecond, read as free by the
--                                  client), -1 when it has none
-- Errors   WRONGTYPE        the lease key is not a hash
--          COORD_BADSTATE   the lease hash lacks its owner or fence field
local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence')
if not cur[1] and not cur[2] and redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
if not cur[2] and cur[1] and string.byte(cur[1], -1) == 33 then -- 33 is '!'
  return false -- a tombstone (fencing_abandon): free
end
if not (cur[1] and cur[2]) then
  return redis.error_reply('COORD_BADSTATE lease hash lacks its owner or fence field')
end
return {cur[1], cur[2], redis.call('PTTL', KEYS[1])}
