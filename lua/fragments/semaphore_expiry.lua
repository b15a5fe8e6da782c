-- fragment semaphore_expiry: the key's TTL follows its latest permit; in
-- sections of inline code (no closure built on each run). Each reads and
-- checks what it needs before anything is written, and returns the
-- COORD_BADSTATE error reply from the script, nothing written, when a
-- score it goes by is outside the layout. Uses key, member (the caller's
-- permit), outside and expiry (semaphore_state).
--#section next
-- semaphore_expiry.next: read before member is removed or expires sooner,
-- when the key may expire with it. Sets after (declared by the script) to
-- the expiry of the highest permit other than member (ms, or math.huge)
-- and after_score (declared too) to its score as the reply gives it, or
-- after to false when no other permit ranks above the records. One call:
-- the two highest members, read by rank (a read by member scans a small
-- sorted set, a listpack).
local top = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
local i = #top - 1
if top[i] == member then
  i = i - 2
end
local m = top[i]
if m == nil or m == 'capacity' or m == 'multi' or m == 'waiting' then
  after = false -- records score below 0 (checked): no other permit
else
  after_score = top[i + 1]
  after = expiry(after_score)
  if after == nil then
    return redis.error_reply(outside)
  end
end
--#section extend
-- semaphore_expiry.extend: before member is scored score (ms, a number)
-- by an acquisition on a key without a TTL (at, of the fragment
-- semaphore_now, is -1). Such a key holds a permit without expiry, and
-- keeps none; or it lost its TTL by hand (PERSIST, a RESTORE without TTL)
-- while no permit lacks an expiry: it gets its TTL back, the latest
-- permit's (member's old score, at or below its new one, left out).
if redis.call('ZCOUNT', key, '+inf', '+inf') == 0 then
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local until_ms = score
  if top[1] ~= member and top[1] ~= 'capacity' and top[1] ~= 'multi' and top[1] ~= 'waiting' then
    local e = expiry(top[2])
    if e == nil then
      return redis.error_reply(outside)
    end
    until_ms = math.max(until_ms, e)
  end
  redis.call('PEXPIREAT', key, until_ms)
end
