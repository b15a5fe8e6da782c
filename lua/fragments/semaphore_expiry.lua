-- fragment semaphore_expiry: the key's TTL follows its latest permit; in
-- sections of inline code (no closure built on each run). Each reads and
-- checks what it needs before anything is written, and returns the
-- COORD_BADSTATE error reply from the script, nothing written, when a
-- score it goes by is outside the layout. Uses key, member (the caller's
-- permit), now (time_ms), latest, outside and expiry (semaphore_state).
--#section next
-- semaphore_expiry.next: read before member is removed or expires sooner,
-- when the key may expire with it. Sets after (declared by the script) to
-- the expiry of the highest permit other than member (ms, or math.huge)
-- and after_score (declared too) to its score as the reply gives it, or
-- after to false when no other permit ranks above the records. Then,
-- when a live tombstone (semaphore_abandon) expires later, after is its
-- expiry (and after_score the same in whole ms): the key lives until no
-- tombstone is in force. One call, the two highest members, read by rank
-- (a read by member scans a small sorted set, a listpack); a second, the
-- latest tombstone (the lowest score in (-1, 0); tombstones rank below
-- every permit and above the records), only when one could outlive that
-- permit: when it expires within two minutes (no tombstone in the layout
-- expires later: semaphore_state) or a tombstone is the highest other
-- member. A tombstone over the bound is then outside the layout; one left
-- unread is not checked.
local top = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
local i = #top - 1
if top[i] == member then
  i = i - 2
end
local m = top[i]
if m == nil or m == 'capacity' or m == 'multi' or m == 'waiting' then
  after = false -- records score below 0 (checked): no other permit nor tombstone
else
  after_score = top[i + 1]
  -- expiry(after_score), inline (a call costs more); or a tombstone's.
  local x = tonumber(after_score)
  if x ~= nil and x >= 0 and (x == math.huge or (x <= latest and x % 1 == 0)) then
    after = x
  elseif x == nil and (after_score == 'inf' or after_score == '+inf') then
    after = math.huge
  elseif x == nil or x <= -1 or x >= 0 then
    return redis.error_reply(outside)
  else
    after = false -- a tombstone: no other permit
  end
  if after == false or after < now + 120000 then
    local stones = redis.call('ZRANGEBYSCORE', key, '(-1', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
    if stones[1] then
      local gone = math.floor(-tonumber(stones[2]) * 8796093022208 + 0.5)
      if gone > now + 120000 then
        return redis.error_reply(outside) -- no tombstone lasts over two minutes
      end
      if gone > now and (after == false or after < gone) then
        after, after_score = gone, string.format('%d', gone)
      end
    end
  end
end
--#section extend
-- semaphore_expiry.extend: before member is scored score (ms, a string)
-- by an acquisition,
-- makes the key live at least until then. A key without a TTL holds a
-- permit without expiry: GT keeps it so. When GT changed nothing, a key
-- left without a TTL by an operator (PERSIST, a RESTORE without TTL)
-- while no permit lacks an expiry gets its TTL back: the latest permit's
-- (member's old score, at or below its new one, left out), or the
-- latest tombstone's when no other permit is there.
if redis.call('PEXPIREAT', key, score, 'GT') == 0 and redis.call('PEXPIRETIME', key) == -1 and
    redis.call('ZCOUNT', key, '+inf', '+inf') == 0 then
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at = tonumber(score)
  if top[1] ~= member and top[1] ~= 'capacity' and top[1] ~= 'multi' and top[1] ~= 'waiting' then
    local e = expiry(top[2])
    if e == nil then
      local x = tonumber(top[2])
      if x == nil or x <= -1 or x >= 0 then
        return redis.error_reply(outside)
      end
      -- Tombstones only: the latest one (the lowest score).
      local stones = redis.call('ZRANGEBYSCORE', key, '(-1', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
      e = math.floor(-tonumber(stones[2]) * 8796093022208 + 0.5)
      if e > now + 120000 then
        return redis.error_reply(outside) -- no tombstone lasts over two minutes
      end
    end
    at = math.max(at, e)
  end
  redis.call('PEXPIREAT', key, string.format('%d', at))
end
