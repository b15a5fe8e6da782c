-- fencing_guarded_set: write a value at a fenced resource only if the
-- writer's fencing token is not older than the newest token the resource
-- has accepted (compare and write, atomically).
--
-- KEYS[1]  resource key (a hash {fence, value})
-- ARGV[1]  writer's fencing token, a canonical decimal integer string
--          (1..9223372036854775807)
-- ARGV[2]  value to store (bytes)
-- ARGV[3]  TTL of the resource key in milliseconds; 0 keeps the key without
--          expiry (and removes a TTL it had)
--
-- Reply    {1, fence}  written; fence is ARGV[1]
--          {0, fence}  rejected: the resource accepted a newer token, fence
--                      (a decimal string); nothing changed
-- Errors   COORD_BADARG     ARGV[1] is not a canonical positive integer
--          WRONGTYPE        the resource key is not a hash (nothing written)
--          COORD_BADSTATE   the key is a hash this script did not write (no
--                           fence field, or fields besides fence and value),
--                           or its fence is not a canonical positive integer
local tok = ARGV[1]
if not string.match(tok, '^[1-9]%d*$') or #tok > 19 or (#tok == 19 and tok > '9223372036854775807') then
  return redis.error_reply('COORD_BADARG fencing token must be a positive int64')
end
local n = redis.call('HLEN', KEYS[1])
local cur = redis.call('HGET', KEYS[1], 'fence')
if n > 0 and (not cur or n > 2 or (n == 2 and redis.call('HEXISTS', KEYS[1], 'value') == 0)) then
  return redis.error_reply('COORD_BADSTATE resource key is a hash not written by a guarded set')
end
if cur then
  if not string.match(cur, '^[1-9]%d*$') or #cur > 19 then
    return redis.error_reply('COORD_BADSTATE stored fence is not a canonical positive integer')
  end
  -- Compare as decimal strings: a shorter string is a smaller number.
  if #tok < #cur or (#tok == #cur and tok < cur) then
    return {0, cur}
  end
end
redis.call('HSET', KEYS[1], 'fence', tok, 'value', ARGV[2])
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
else
  redis.call('PERSIST', KEYS[1])
end
return {1, tok}
