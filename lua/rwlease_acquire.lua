-- rwlease_acquire: take a shared read lease if no writer holds the key
-- (and, with writer preference or phase-fair, none waits), or the
-- exclusive write lease if no live reader or writer holds it; a refused
-- blocking writer (and, phase-fair, reader) records that it waits.
--
-- Layout of the read-write lease key (a sorted set; one key, no hash tag
-- needed). Scores are expiries in server-time milliseconds:
--   member "R:<token>"  a read lease; score = its expiry (> 0)
--   member "W:<token>"  the write lease; score = its expiry (> 0). Never
--                       live together with a live read lease.
--   member "Q:<token>"  a writer waiting in a blocking Write (writer
--                       preference or phase-fair); score = -(its expiry)
--                       (< 0), so that holders and waiting entries are two
--                       score ranges
--   member "R:<token>"  scored -(its expiry) (< 0): a reader waiting in a
--                       blocking Read (phase-fair) because a writer holds
--                       or waits. The release of a live write lease turns
--                       every such marker into the reader's read lease
--                       (the score's sign flipped: it expires when the
--                       marker would have; rwlease_release.lua), so the
--                       readers that waited through a write phase hold the
--                       next read phase, ahead of writers still waiting;
--                       the reader's next attempt finds its own entry live
--   member "R:<token>" or "W:<token>" scored -(expiry) - 0.5 (an integer
--                       and a half, below 0): the tombstone of an
--                       abandoned acquisition (rwlease_abandon.lua). While
--                       it lives its member is refused (the acquisition's
--                       late request takes nothing and records nothing);
--                       it is neither a holder nor a waiting writer to
--                       anyone else, and is never turned into a read lease
-- An entry is live while its expiry is after now; expired entries are
-- pruned by the next script that writes. The key's TTL follows the latest
-- expiry, and the key is deleted with its last entry. Releases publish on
-- the channel "coordination:" followed by KEYS[1].
--
-- KEYS[1]  read-write lease key
-- ARGV[1]  lease id: the member "R:<token>" (read) or "W:<token>" (write),
--          token the caller's random owner token
-- ARGV[2]  TTL in milliseconds (integer >= 1)
-- ARGV[3]  read: 1 to refuse while a writer waits (writer preference and
--          phase-fair), 0 to ignore waiting writers. Write: the waiting
--          marker's lifetime in milliseconds: when > 0 and the lease is
--          refused, the member "Q:<token>" is set to expire ARGV[3] ms from
--          now; 0 records nothing.
-- ARGV[4]  read only, optional (a phase-fair blocking Read): the waiting
--          marker's lifetime in milliseconds: when > 0 and the lease is
--          refused, the member "R:<token>" is scored -(now + ARGV[4]); a
--          grant overwrites it with the lease's expiry. 0 or absent
--          records nothing.
--
-- Reply    {1, 0, now_ms}         acquired (a writer's own Q:<token> is
--                                 removed); also when the caller's own
--                                 entry is live already (a re-sent
--                                 request): its expiry is set again
--          {0, retry_ms, now_ms}  refused; retry_ms (>= 1) until the entry
--                                 in the way expires: for a reader, the
--                                 writer's lease or (ARGV[3] = 1) the
--                                 latest waiting writer's marker; for a
--                                 writer, the earliest live holder
--          {0, retry_ms, now_ms}  also, with nothing written, when the
--                                 caller's member is a live tombstone
--                                 (rwlease_abandon): retry_ms until it
--                                 expires
--          now_ms is the server time the script ran at.
-- Errors (all raised before anything is written):
--   WRONGTYPE       the key is not a sorted set (raised by ZSCORE)
--   COORD_BADARG    ARGV[1] is not "R:<token>" or "W:<token>"
--   COORD_BADSTATE  a live entry in the holders' (or the waiting
--                   entries') score range is not R:/W: (or Q:/R:, or a
--                   W: tombstone), or the
--                   key's lowest or highest score is not an integer
--                   within the longest TTL of 0 (fragment rwlease_prune)
local key, member = KEYS[1], ARGV[1]
local ttl = tonumber(ARGV[2])
local arg = tonumber(ARGV[3])
--#include rwlease_member
local queue = 'Q:' .. string.sub(member, 3)

--#include time_ms
local nows = string.format('%d', now)

local mine = redis.call('ZSCORE', key, member)
local holder = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local waiting = redis.call('ZRANGEBYSCORE', key, '-inf', '(-' .. nows, 'WITHSCORES', 'LIMIT', 0, 1)
local hk = holder[1] and string.sub(holder[1], 1, 2)
local wk = waiting[1] and string.sub(waiting[1], 1, 2)
if (hk and hk ~= 'R:' and hk ~= 'W:') or (wk and wk ~= 'Q:' and wk ~= 'R:' and not (wk == 'W:' and tonumber(waiting[2]) % 1 ~= 0)) then
  return redis.error_reply('COORD_BADSTATE read-write lease key holds an entry that is not R:, W: or Q:<token> in its score range')
end

--#include rwlease_prune
-- refuse prunes, and for a blocking writer (or phase-fair reader) records
-- its marker.
local function refuse(retry)
  prune()
  if kind == 'W:' and arg > 0 then
    redis.call('ZADD', key, string.format('%d', -(now + arg)), queue)
  elseif kind == 'R:' and ARGV[4] and tonumber(ARGV[4]) > 0 then
    redis.call('ZADD', key, string.format('%d', -(now + tonumber(ARGV[4]))), member)
  end
  settle()
  return {0, retry, now}
end

if mine and tonumber(mine) % 1 ~= 0 and tonumber(mine) < -now then
  -- The member's own tombstone (rwlease_abandon): its acquisition was
  -- abandoned and this is a late request. Refused, nothing written.
  return {0, math.max(math.floor(-tonumber(mine) - now), 1), now}
end
if not (mine and tonumber(mine) > now) then
  if kind == 'W:' and holder[1] then
    return refuse(tonumber(holder[2]) - now)
  end
  if kind == 'R:' and hk == 'W:' then
    return refuse(tonumber(holder[2]) - now)
  end
  if kind == 'R:' and arg == 1 and wk then
    -- The latest live waiting writer's marker: the first waiting entry,
    -- unless waiting readers (phase-fair) come first.
    local w = wk == 'Q:' and tonumber(waiting[2])
    if not w then
      local all = redis.call('ZRANGEBYSCORE', key, '-inf', '(-' .. nows, 'WITHSCORES')
      for i = 1, #all, 2 do
        if string.sub(all[i], 1, 2) == 'Q:' then
          w = tonumber(all[i + 1])
          break
        end
      end
    end
    if w then
      return refuse(-w - now)
    end
  end
end
if kind == 'W:' then
  redis.call('ZREM', key, queue)
end
prune()
redis.call('ZADD', key, string.format('%d', now + ttl), member)
settle()
return {1, 0, now}
