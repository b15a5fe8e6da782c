-- rwlease_abandon: the background cleanup of an ambiguous read or write
-- acquisition (its reply was lost, so the caller cannot know whether it
-- took the lease): remove the abandoned member as rwlease_release does (a
-- live lease, a phase-fair reader's waiting record, a writer's waiting
-- marker "Q:<token>"; waiters are woken and, after a live write lease,
-- waiting readers get the next read phase, as by rwlease_release), and
-- leave in its place a tombstone: the same member scored -(now + ARGV[2])
-- - 0.5, a score in the waiting entries' range that no waiting record has
-- (theirs are integers). rwlease_acquire refuses the member while its
-- tombstone lives (nothing written: no lease, no waiting record), so that
-- the acquisition's request, if it is still on its way and reaches the
-- server after this cleanup, takes nothing; every other member ignores it
-- (it is no holder and no waiting writer), rwlease_release never turns it
-- into a read lease, and it expires with the other waiting entries (prune
-- removes it ARGV[2] ms from now; the key's TTL covers it). Run only on
-- that rare path, never by an acquisition.
--
-- KEYS[1]  read-write lease key (layout in rwlease_acquire.lua)
-- ARGV[1]  lease id of the abandoned acquisition: "R:<token>" or
--          "W:<token>"
-- ARGV[2]  the tombstone's TTL in milliseconds (integer >= 1)
--
-- Reply    {1, now_ms}  the member held a live lease: released, tombstone
--                       written
--          {0, now_ms}  it held none (free, a waiting record, expired, or
--                       already its tombstone: a re-send, whose tombstone
--                       is written again): tombstone written
--          Waiters are notified as by rwlease_release.
-- Errors (raised before anything is written):
--   WRONGTYPE     the key is not a sorted set (raised by ZSCORE)
--   COORD_BADARG  ARGV[1] is not "R:<token>" or "W:<token>"
--   COORD_BADSTATE the key's lowest or highest score is not an integer
--                 within the longest TTL of 0 (fragment rwlease_prune)
--#include notify
local key, member = KEYS[1], ARGV[1]
--#include rwlease_member

--#include time_ms
local nows = string.format('%d', now)
--#include rwlease_prune

local mine = redis.call('ZSCORE', key, member)
local queue = 'Q:' .. string.sub(member, 3)
local marker = false
if kind == 'W:' then
  marker = redis.call('ZSCORE', key, queue)
end
local live = mine ~= false and tonumber(mine) > now
local notify = live
if marker then
  redis.call('ZREM', key, queue)
  notify = notify or tonumber(marker) < -now
end
redis.call('ZADD', key, '-' .. string.format('%d', now + tonumber(ARGV[2])) .. '.5', member)
prune()
local bottom = settle()
if live and kind == 'W:' and bottom and bottom < -now then
  -- As rwlease_release: the readers that waited through the write phase
  -- hold the next read phase; tombstones (fractional scores) stay.
  local waiting = redis.call('ZRANGEBYSCORE', key, '-inf', '(-' .. nows, 'WITHSCORES')
  for i = 1, #waiting, 2 do
    local s = tonumber(waiting[i + 1])
    if string.sub(waiting[i], 1, 2) == 'R:' and s % 1 == 0 then
      redis.call('ZADD', key, string.format('%d', -s), waiting[i])
    end
  end
end
--#include released
if live then
  return {1, now}
end
return {0, now}
