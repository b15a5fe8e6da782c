-- fencing_acquire: take a fencing-token lock if it is free, drawing the next
-- fencing token from the fenced name's counter, atomically.
--
-- Layout (changed in issue 24): the counters of every fenced name of one
-- Cluster slot share one hash, KEYS[3], whose fields are the fenced names'
-- counter keys (KEYS[2], prefixed) and whose values are their last tokens,
-- so that the number of persistent keys is bounded (one per slot used, per
-- key prefix) however many names are fenced. Earlier versions kept each
-- name's counter in a string at KEYS[2]; such a counter is folded in by the
-- first acquisition that finds no field for its name: the next token is
-- the old counter + 1 (never lower), and KEYS[2] is left holding the
-- tombstone 'moved' for 7 days, which earlier versions refuse (their
-- COORD_BADCOUNTER: a counter with a TTL) instead of starting again from 1.
--
-- KEYS[1]  lease key (a hash {owner, fence[, holder]}; expires). The owner
--          field holds the holder's owner token, followed by '+' once a
--          contended attempt has found it held (the release then notifies
--          waiters, as the lock's key does: lock_acquire.lua). Or a
--          tombstone: {owner} alone, holding a tombstone list
--          (fencing_abandon.lua: one to 8 entries, oldest first, each an
--          abandoned owner token followed by '!', e.g. 'tokA!' or
--          'tokA!tokB!'), with a TTL
-- KEYS[2]  the fenced name's counter key: the field of KEYS[3] that holds
--          its counter; as a key, read only while that field is absent (an
--          earlier version's counter: a string holding a non-negative
--          integer, never expiring, or the tombstone 'moved' with a TTL)
-- KEYS[3]  the slot's shared counter hash ({KEYS[2] field: last token as a
--          canonical non-negative integer}; never expires). The three keys
--          must be in one Cluster slot.
-- ARGV[1]  owner token of the caller (never ends with '+')
-- ARGV[2]  TTL in milliseconds (integer >= 1)
-- ARGV[3]  optional holder description (any bytes; absent or empty: none),
--          stored in the lease's holder field for observers. Callers that
--          omit it get the two-field lease of earlier versions.
--
-- Reply    fence     acquired (a string): the fencing token in decimal
--                    (exact up to 9223372036854775807). A re-sent request
--                    with the same owner token finds its own lease and
--                    returns the same fence without touching the counter
--                    (the TTL is set again).
--                    A tombstone whose list lacks the caller's token
--                    (fencing_abandon) is a free lease: it is
--                    overwritten.
--          pttl_ms   held by another owner (an integer >= 0): its
--                    remaining TTL (a holder without one is COORD_BADSTATE);
--                    the owner field is marked with a trailing '+' so that
--                    its release notifies waiters (every contended attempt
--                    marks: a blocked Acquire's, a leader follower's, a
--                    TryAcquire's). Also the remaining TTL (0 when none)
--                    of a tombstone whose list holds the caller's own
--                    token (fencing_abandon: its acquisition was
--                    abandoned, this is a late request):
--                    nothing is written, no TTL is set, the counter is
--                    not read
-- Errors (all raised before anything is written):
--   COORD_BADARG      two of the three keys are the same key
--   WRONGTYPE         the lease key is not a hash
--   COORD_BADSTATE    the lease hash lacks its owner or fence field (and
--                     is not a tombstone, whose every entry is checked: an
--                     owner token is 22 bytes of base64url, or the 36
--                     bytes of lower-case hex and '-' of earlier versions;
--                     at most 8 entries), or
--                     another holder's hash has no TTL (it would never leave)
--   COORD_BADCOUNTER  the shared counter hash is not a hash or has a TTL;
--                     the counter (its field, or the earlier version's key
--                     while the field is absent) is not a canonical
--                     integer, is negative or is beyond the int64 range;
--                     the earlier version's key is not a string or has a
--                     TTL (other than the tombstone's)
--   COORD_OVERFLOW    the counter is at 9223372036854775807
if KEYS[1] == KEYS[2] or KEYS[3] == KEYS[1] or KEYS[3] == KEYS[2] then
  return redis.error_reply('COORD_BADARG lease key, counter key and shared counter hash must be three keys')
end
-- A free lease is an absent key (HLEN 0); anything else is read in full.
-- A tombstone (fencing_abandon: the owner field alone, a list of tokens
-- each followed by '!') is free to every token not in it: it falls through
-- to the free path, whose HSET overwrites its owner field.
local len = redis.call('HLEN', KEYS[1])
if len > 0 then
  local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence')
  local o = cur[1]
  if o and cur[2] then
    if o == ARGV[1] or o == ARGV[1] .. '+' then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return cur[2]
    end
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl < 0 then
      return redis.error_reply('COORD_BADSTATE lease hash has no TTL: its holder would never leave')
    end
    if string.byte(o, -1) ~= 43 then -- 43 is '+'
      redis.call('HSET', KEYS[1], 'owner', o .. '+')
    end
    return pttl
  end
  if not (o and string.byte(o, -1) == 33 and len == 1) then -- 33 is '!'
    return redis.error_reply('COORD_BADSTATE lease hash lacks its owner or fence field')
  end
--#include stone_list.read
  local n, mine = stones(o, ARGV[1])
  if n == 0 then
    return redis.error_reply('COORD_BADSTATE lease hash holds a tombstone that is not a list of owner tokens')
  end
  if mine then
    -- This request's own acquisition was abandoned (a late request):
    -- refused, nothing written, no TTL restarted, the counter untouched.
    return math.max(redis.call('PTTL', KEYS[1]), 0)
  end
end
-- The counter. A WRONGTYPE on a counter key is the counter's (the lease
-- key, read above, is a hash or absent), and reported as such; the Lua
-- pcall catches only to tell that error apart: every other error is raised
-- again as it came, so a NOPERM or OOM stays what it is.
local ok, c = pcall(redis.call, 'HGET', KEYS[3], KEYS[2])
if not ok then
  local msg = type(c) == 'table' and c.err or tostring(c)
  if string.find(msg, 'WRONGTYPE', 1, true) then
    return redis.error_reply('COORD_BADCOUNTER shared counter hash holds the wrong Redis type, not a hash')
  end
  error(c)
end
local old
if c then
  -- A TTL on the shared hash would restart every counter of the slot when
  -- it ran out: refused on every acquisition (6% of the pair's server
  -- time, paid for tokens that never go back).
  if redis.call('PTTL', KEYS[3]) ~= -1 then
    return redis.error_reply('COORD_BADCOUNTER shared counter hash has a TTL; it must never expire')
  end
else
  -- No field: the name's first acquisition in this layout (or the first
  -- after a retirement). An earlier version's counter key is folded in.
  ok, c = pcall(redis.call, 'GET', KEYS[2])
  if not ok then
    local msg = type(c) == 'table' and c.err or tostring(c)
    if string.find(msg, 'WRONGTYPE', 1, true) then
      return redis.error_reply('COORD_BADCOUNTER counter key holds the wrong Redis type, not a string')
    end
    error(c)
  end
  if c == 'moved' then
    c = nil -- folded before, then retired: the sequence starts again
  elseif c then
    if redis.call('PTTL', KEYS[2]) ~= -1 then
      return redis.error_reply('COORD_BADCOUNTER counter key has a TTL; it must never expire')
    end
    old = c
  end
  if redis.call('PTTL', KEYS[3]) >= 0 then
    return redis.error_reply('COORD_BADCOUNTER shared counter hash has a TTL; it must never expire')
  end
end
-- One pattern accepts every canonical positive integer of up to 18 digits
-- (below the int64 limit); the rest is told apart only here.
if c and not (#c < 19 and string.find(c, '^[1-9]%d*$')) and c ~= '0' then
  if string.match(c, '^%-%d+$') then
    return redis.error_reply('COORD_BADCOUNTER counter is negative')
  end
  if not string.match(c, '^[1-9]%d*$') then
    return redis.error_reply('COORD_BADCOUNTER counter is not a canonical integer')
  end
  if #c > 19 or c > '9223372036854775807' then
    return redis.error_reply('COORD_BADCOUNTER counter is beyond the int64 range')
  end
  if c == '9223372036854775807' then
    return redis.error_reply('COORD_OVERFLOW counter is at 9223372036854775807')
  end
end
if old then
  redis.call('HSET', KEYS[3], KEYS[2], old)
  redis.call('SET', KEYS[2], 'moved', 'PX', 604800000)
end
local n = redis.call('HINCRBY', KEYS[3], KEYS[2], 1)
-- HINCRBY's reply is a Lua number, exact below 2^53 (and '%d' prints it
-- exactly, cheaper than '%.0f'); read the exact string beyond.
local fence
if n < 9007199254740992 then
  fence = string.format('%d', n)
else
  fence = redis.call('HGET', KEYS[3], KEYS[2])
end
if ARGV[3] and ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', fence, 'holder', ARGV[3])
else
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', fence)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return fence
