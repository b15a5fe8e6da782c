-- semaphore_abandon: the background cleanup of an ambiguous acquisition of
-- semaphore permits (its reply was lost, so the caller cannot know whether
-- it took them): give the permits back if the abandoned member holds them,
-- and leave in their place a tombstone, the same member scored
-- -(e / 2^43) (in (-1, 0): above every record, below every permit), e the
-- server time in ms ARGV[2] ms from now, so that the acquisition's
-- request, if it is still on its way (a retransmission, a stalled link)
-- and reaches the server after this cleanup, takes nothing:
-- semaphore_acquire refuses the caller's own tombstone until e. A
-- tombstone is no permit: the permits in use, the holders, State and every
-- other verb leave it out, so it costs the other acquirers no capacity;
-- once e has passed it is absent, and the next acquisition prunes it. The
-- key lives at least until e (a tombstone always expires: a permit
-- without expiry abandoned gives the key back its TTL, unless another
-- permit without expiry or a capacity set in the key keeps it without
-- one). Run only on that rare path, never by an acquisition.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
-- ARGV[1]  the abandoned permit id: the member "P:<n>:<token>"
-- ARGV[2]  the tombstone's TTL in milliseconds (integer, 1 <= ARGV[2] <=
--          60000, what engine.AbandonFor gives at most: a tombstone
--          expiring later than two minutes from now is outside the layout)
--
-- Reply    1  the member was live: released (its permits are free at once;
--             when the "waiting" record is there, it is removed and
--             waiters are notified, as by semaphore_release), tombstone
--             written
--          0  the member was absent or expired: tombstone written (a key
--             that does not exist is created with the record "capacity"
--             scored -n, n the member's, and the tombstone, expiring with
--             it; the next acquisition records its own capacity, no permit
--             being live); or already a tombstone in force (a re-sent
--             cleanup: nothing changed)
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a sorted set
--   COORD_BADARG    ARGV[1] is not a member "P:<n>:<token>" with
--                   1 <= n <= 2^53-1, or ARGV[2] is not an integer in
--                   1..60000
--   COORD_BADSTATE  the sorted set lacks a valid capacity record, or a
--                   score the script goes by is outside the layout (as
--                   semaphore_release's, fragment semaphore_state)
--#include notify
local key = KEYS[1]
local member = ARGV[1]
local life = tonumber(ARGV[2])
local n = string.match(member, '^P:(%d+):.')
n = n and tonumber(n)
if n == nil or n < 1 or n > 9007199254740991 then
  return redis.error_reply('COORD_BADARG permit id is not P:<n>:<token> with 1 <= n <= 2^53-1')
end
if life == nil or life < 1 or life > 60000 or life % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG tombstone TTL is not an integer in 1..60000 ms')
end

local r = redis.call('ZMSCORE', key, 'capacity', 'waiting', 'multi', member)
--#include semaphore_set
--#include time_ms
local gone = now + life
local grave = string.format('%.17g', -gone / 8796093022208)
if not r[1] then
  redis.call('ZADD', key, -n, 'capacity', grave, member)
  redis.call('PEXPIREAT', key, string.format('%d', gone))
  return 0
end
local mine = r[4]
--#include semaphore_state
if stone and stone > now then
  return 0 -- a re-send: the tombstone is in force
end
local live = mine_at ~= nil and mine_at > now
local notify = live and r[2] ~= false
-- When the key expired with this permit (its only one without expiry, or
-- the one whose expiry is the key's; or the key lost its TTL by hand), it
-- expires with the next permit or tombstone, and not before the new
-- tombstone. A key with a capacity set in it has no TTL and stays.
local moves = false
if live and not fixed then
  if mine_at == math.huge then
    moves = redis.call('ZCOUNT', key, '+inf', '+inf') == 1
  else
    local at = redis.call('PEXPIRETIME', key)
    moves = at == mine_at or (at == -1 and redis.call('ZCOUNT', key, '+inf', '+inf') == 0)
  end
end
local after, after_score = nil, nil
if moves then
--#include semaphore_expiry.next
end
redis.call('ZADD', key, grave, member)
if notify then
  redis.call('ZREM', key, 'waiting')
end
if moves then
  if after == math.huge then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, string.format('%d', math.max(after or 0, gone)))
  end
elseif not fixed then
  -- The key lives at least as long as the tombstone (a key without a TTL
  -- keeps none: GT).
  redis.call('PEXPIREAT', key, string.format('%d', gone), 'GT')
end
--#include released
if live then
  return 1
end
return 0
