-- fragment lock_value: the lock key's value v (a string: the key exists)
-- checked against the layout before the script writes anything (a
-- plain or FIFO lock: lock_acquire.lua, lock_fifo_acquire.lua); inline
-- code, no closure. The value is the holder's owner token, followed by
-- '+' once a waiter found it held; or the tombstones of abandoned
-- acquisitions (lock_abandon): one to eight owner tokens, each followed by
-- '!' ("<token>!" or "<token>!<token>!..."). An owner token is 22 bytes
-- of base64url (engine.NewToken) or the 36 bytes of lower-case hex and
-- '-' of earlier versions.
--#section read
-- lock_value.read: uses v and ARGV[1] (the caller's owner token).
-- Defines marked (v ends with the waiter mark '+'), stone (v is
-- tombstones), mine (with stone: ARGV[1] is one of their tokens) and n
-- (with stone: how many). Returns the COORD_BADSTATE error reply from the
-- script when v is neither.
local last = string.byte(v, -1)
local marked, stone = last == 43, last == 33 -- 43 is '+', 33 is '!'
local mine, n = false, 0
if stone then
  for t in string.gmatch(v, '([^!]*)!') do
    if not ((#t == 22 and not string.find(t, '[^%w_%-]'))
        or (#t == 36 and string.match(t, '^[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+$')
          and string.byte(t, 9) == 45 and string.byte(t, 14) == 45 and string.byte(t, 19) == 45 and string.byte(t, 24) == 45)) then
      return redis.error_reply('COORD_BADSTATE the lock key holds a value that is not an owner token')
    end
    mine = mine or t == ARGV[1]
    n = n + 1
  end
else
  local t = v
  if marked then
    t = string.sub(v, 1, -2)
  end
  if not ((#t == 22 and not string.find(t, '[^%w_%-]'))
      or (#t == 36 and string.match(t, '^[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+$')
        and string.byte(t, 9) == 45 and string.byte(t, 14) == 45 and string.byte(t, 19) == 45 and string.byte(t, 24) == 45)) then
    return redis.error_reply('COORD_BADSTATE the lock key holds a value that is not an owner token')
  end
end
--#section add
-- lock_value.add: with stone (lock_value.read), adds the tombstone of
-- ARGV[1] (the abandoned token) unless mine: after the others, dropping
-- the oldest (the first) when eight are there; the key then expires after
-- ARGV[2] ms (the new tombstone's life) or its remaining TTL, the longer.
if not mine then
  if n >= 8 then
    v = string.sub(v, string.find(v, '!', 1, true) + 1)
  end
  redis.call('SET', KEYS[1], v .. ARGV[1] .. '!', 'PX',
    math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[2])))
end
