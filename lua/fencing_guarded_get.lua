-- fencing_guarded_get: read a fenced resource written by
-- fencing_guarded_set. Writes nothing.
--
-- KEYS[1]  resource key (a hash {fence, value})
--
-- Reply    {fence, value}  fence as a decimal string, value as bytes
--          false           the resource does not exist
-- Errors   COORD_WRONGTYPE  the resource key is not a hash
local r = redis.pcall('HMGET', KEYS[1], 'fence', 'value')
if r.err then
  return redis.error_reply('COORD_WRONGTYPE resource key does not hold a hash')
end
if not r[1] then
  return false
end
return {r[1], r[2] or ''}
