-- rwlease_release: remove a holder's read or write lease (and a writer's
-- waiting marker) and wake waiters.
--
-- KEYS[1]  read-write lease key (layout in rwlease_acquire.lua)
-- ARGV[1]  lease id: the holder's member, "R:<token>" or "W:<token>"; for
--          "W:<token>" the marker "Q:<token>" of the same writer is removed
--          too (a blocking Write that gave up); "R:<token>" is removed
--          whether a lease or a waiting reader's marker (a phase-fair
--          blocking Read that gave up)
--
-- Reply    {1, now_ms}  released: the entry was live and is removed
--          {0, now_ms}  already gone: released before, or expired (an
--                       expired entry is pruned); nothing else changed.
--                       Also for the member's tombstone (rwlease_abandon),
--                       which stays.
--                       A release re-sent after a lost reply gets it when
--                       its first send released: the engine reports what
--                       the first did (engine's Handle.RunRelease)
--          Waiters are notified on the channel "coordination:" followed by
--          KEYS[1] (best effort) when a live entry or a live writer's
--          marker was removed. The release of a live write lease turns
--          every live waiting reader's marker (an "R:<token>" scored below
--          -now) into that reader's read lease, expiring when the marker
--          would have (phase-fair: the readers that waited through the
--          write phase hold the next read phase; each reader's next
--          attempt finds its lease); an abandoned acquisition's tombstone
--          (rwlease_abandon: a fractional score) is left as it is. Expired entries of others are pruned; the key's TTL
--          follows the latest expiry and the key is deleted with its last
--          entry. An entry belongs to its holder alone: there is no "held
--          by another owner" reply.
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
-- A tombstone (rwlease_abandon: a fractional score) stays: a blocking
-- acquisition that gave up drops its waiting record with this script, and
-- must not undo the cleanup of its ambiguous attempt.
if live or (mine and tonumber(mine) % 1 == 0) then
  redis.call('ZREM', key, member)
end
if marker then
  redis.call('ZREM', key, queue)
  notify = notify or tonumber(marker) < -now
end
prune()
local bottom = settle()
if live and kind == 'W:' and bottom and bottom < -now then
  -- The write phase ends: the readers that waited through it hold the next
  -- read phase (phase-fair). Their expiries are the markers', which the
  -- key's TTL already covers.
  local waiting = redis.call('ZRANGEBYSCORE', key, '-inf', '(-' .. nows, 'WITHSCORES')
  for i = 1, #waiting, 2 do
    local s = tonumber(waiting[i + 1])
    -- A fractional score is a tombstone (rwlease_abandon): it stays.
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
