-- fencing_read: report who holds a fencing-token lease (leader election
-- reads its leader with it). Writes nothing.
--
-- KEYS[1]  lease key (a hash {owner, fence[, holder]} written by
--          fencing_acquire; expires)
--
-- Reply    false                       no leader (the lease is free: no key,
--                                      or a tombstone of fencing_abandon,
--                                      {owner} alone ending with '!': a
--                                      list of one to 8 abandoned tokens,
--                                      each followed by '!'; read as free
--                                      unchecked)
--          {fence, holder, pttl_ms, since}
--                                      fence is the holder's fencing token
--                                      as a decimal string (exact over
--                                      int64); holder is the holder field
--                                      ('' when the lease was taken without
--                                      one);
--                                      pttl_ms is the lease's remaining TTL
--                                      in milliseconds (>= 0); since is the
--                                      term's start a leader recorded
--                                      (server ms since the epoch, decimal;
--                                      '' when absent)
-- Errors   WRONGTYPE        the lease key is not a hash
--          COORD_BADSTATE   the lease hash lacks its owner or fence field,
--                           or has no TTL (its holder would never leave)
local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'holder', 'since')
if not cur[1] and not cur[2] then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('COORD_BADSTATE lease hash lacks its owner or fence field')
  end
  return false
end
if not cur[2] and cur[1] and string.byte(cur[1], -1) == 33 then -- 33 is '!'
  return false -- a tombstone (fencing_abandon): free
end
if not (cur[1] and cur[2]) then
  return redis.error_reply('COORD_BADSTATE lease hash lacks its owner or fence field')
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('COORD_BADSTATE lease hash has no TTL: its holder would never leave')
end
return {cur[2], cur[3] or '', pttl, cur[4] or ''}
