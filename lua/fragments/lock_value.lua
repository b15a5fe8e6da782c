-- fragment lock_value: the lock key's value v (a string: the key exists)
-- checked against the layout before the script writes anything (a
-- plain or FIFO lock: lock_acquire.lua, lock_fifo_acquire.lua); inline
-- code. The value is the holder's owner token, followed by
-- '+' once a waiter found it held; or the tombstones of abandoned
-- acquisitions (lock_abandon): a tombstone list (fragment stone_list).
-- An owner token is 22 bytes of base64url (engine.NewToken) or the 36
-- bytes of lower-case hex and '-' of earlier versions.
--#section read
-- lock_value.read: uses v. Defines marked (v ends with the waiter mark
-- '+') and stone (v ends with '!': tombstones, read by lock_value.stones).
-- Returns the COORD_BADSTATE error reply from the script when v is
-- neither tombstones nor an owner token, possibly marked.
local last = string.byte(v, -1)
local marked, stone = last == 43, last == 33 -- 43 is '+', 33 is '!'
if not stone then
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
--#section stones
-- lock_value.stones: with stone (lock_value.read), inside the branch that
-- takes it and after the function stones (fragment stone_list, its section
-- read, included there, so that no other path builds it). Defines n (how
-- many tombstones v holds) and mine (ARGV[1], the caller's token, is one
-- of them); returns the COORD_BADSTATE error reply from the script when
-- v is not a tombstone list.
local n, mine = stones(v, ARGV[1])
if n == 0 then
  return redis.error_reply('COORD_BADSTATE the lock key holds a value that is not an owner token')
end
--#section add
-- lock_value.add: after lock_value.stones and the function stone_add
-- (fragment stone_list, its section add, included there), adds the
-- tombstone of ARGV[1] (the abandoned token) unless mine: after the
-- others, dropping the oldest (the first) when eight are there; the key
-- then expires after ARGV[2] ms (the new tombstone's life) or its
-- remaining TTL, the longer.
if not mine then
  redis.call('SET', KEYS[1], stone_add(v, ARGV[1]), 'PX',
    math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[2])))
end
