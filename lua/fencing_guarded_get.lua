-- fencing_guarded_get: read a fenced resource written by
-- fencing_guarded_set. Writes nothing.
--
-- KEYS[1]  resource key (a hash {fence, value})
--
-- Reply    {fence, value}  fence as a decimal string, value as bytes
--          false           the resource does not exist
-- Errors   WRONGTYPE        the resource key is not a hash
--          COORD_BADSTATE   the key is a hash not written by
--                           fencing_guarded_set (other fields, no fence, or
--                           a fence that is not a canonical positive integer)
local r = redis.call('HMGET', KEYS[1], 'fence', 'value')
if not r[1] then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('COORD_BADSTATE resource key is a hash not written by a guarded set')
  end
  return false
end
if redis.call('HLEN', KEYS[1]) > 2 then
  return redis.error_reply('COORD_BADSTATE resource key is a hash not written by a guarded set')
end
if not string.match(r[1], '^[1-9]%d*$') or #r[1] > 19 then
  return redis.error_reply('COORD_BADSTATE stored fence is not a canonical positive integer')
end
return {r[1], r[2] or ''}
