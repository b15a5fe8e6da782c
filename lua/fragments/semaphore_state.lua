-- fragment semaphore_state: the semaphore key's records and the caller's
-- member checked against the layout (semaphore_acquire.lua) before the
-- script writes anything; inline code, no function (every local function
-- is a closure built on each run: a cost on every call; expiry, for the
-- scores read on the rarer paths, is the fragment semaphore_score).
-- A permit's score is its expiry in server-time ms: an integer >= 0 that
-- no TTL puts past now + 9223372036855 (the longest time.Duration in ms,
-- rounded up), or +inf (no expiry). The records are the members
-- "capacity" (score -capacity, an integer with 1 <= capacity <= 2^53-1),
-- "multi" and "waiting" (below 0 and above -inf). Any other score a script
-- goes by (the earliest live permit for a retry time, the next latest for
-- the key's TTL) is checked with expiry where it is read. Scores a script
-- does not read are not checked: that would cost every call two more
-- commands (coordctl inspect reports them).
-- Uses key, now (semaphore_now or time_ms), r (a ZMSCORE reply:
-- 'capacity' first, then the two other records in either order) and mine
-- (the caller's member's score, false when it has none). Defines latest,
-- outside, cap (the recorded capacity), records (how many records the key
-- holds) and mine_at (mine's expiry, nil when mine is false). Returns the
-- COORD_BADSTATE error reply from the script when one is outside.
-- A score reply is always a number's text (or inf, -inf, which both
-- Redis' Lua and miniredis' convert): converted by arithmetic, once
-- (tonumber converts twice). Infinities are told by 1/0: miniredis' Lua
-- has math.huge the largest finite number, the scripts' stand-in for +inf.
local latest = now + 9223372036855
local outside = 'COORD_BADSTATE semaphore key holds a score outside its layout'
local cap = r[1]
if cap then
  cap = cap + 0
end
if not cap or cap >= 0 or cap < -9007199254740991 or cap % 1 ~= 0 then
  return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
end
cap = -cap
local records = 1
for i = 2, 3 do
  if r[i] then
    local x = r[i] + 0
    if x >= 0 or x == -1 / 0 then
      return redis.error_reply(outside)
    end
    records = records + 1
  end
end
local mine_at = nil
if mine then
  mine_at = mine + 0
  if mine_at == 1 / 0 then
    mine_at = math.huge
  end
  if mine_at ~= math.huge and (mine_at < 0 or mine_at > latest or mine_at % 1 ~= 0) then
    return redis.error_reply(outside)
  end
end
