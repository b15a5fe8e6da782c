-- fragment semaphore_state: the semaphore key's records and the caller's
-- member checked against the layout (semaphore_acquire.lua) before the
-- script writes anything; inline code, no function but expiry (every
-- local function is a closure built on each run: a cost on every call).
-- A permit's score is its expiry in server-time ms: an integer >= 0 that
-- no TTL puts past now + 9223372036855 (the longest time.Duration in ms,
-- rounded up), or +inf (no expiry). The records are the members
-- "capacity" or "capacity-set" (score -capacity, an integer with 1 <=
-- capacity <= 2^53-1), "multi", "waiting" and "draining" (below 0 and
-- above -inf). Any other score a script
-- goes by (the earliest live permit for a retry time, the next latest for
-- the key's TTL) is checked with expiry where it is read. Scores a script
-- does not read are not checked: that would cost every call two more
-- commands (coordctl inspect reports them).
-- Uses key, now (time_ms), r (a ZMSCORE reply: 'capacity' first, then
-- 'multi' and 'waiting' in either order; with fixed, r[1] is the
-- "capacity-set" record's: fragment semaphore_set, which also gives
-- drain_rec) and mine (the caller's member's score, false when it has
-- none). Defines latest, outside, expiry, cap (the recorded capacity),
-- records (how many records the key holds), draining (the "draining"
-- record is there), mine_at (mine's expiry, nil when mine is false or a
-- tombstone) and stone (when mine is a tombstone of the caller's member,
-- left by semaphore_abandon and scored -(its expiry in ms) / 2^43, in
-- (-1, 0), an expiry at most two minutes from now (semaphore_abandon
-- writes one at most a minute ahead; the second minute is a margin for a
-- server clock set back, or a replica's after a failover; a later one is
-- outside the layout): that expiry in ms, which may have passed (an
-- expired tombstone is no longer in force: it is absent); false
-- otherwise).
-- Returns the COORD_BADSTATE error reply from the script when one is
-- outside.
local latest = now + 9223372036855
local outside = 'COORD_BADSTATE semaphore key holds a score outside its layout'
-- expiry returns the expiry a permit's score s (as a reply gives it)
-- stands for, math.huge for +inf, or nil when s is outside the layout.
local function expiry(s)
  local v = tonumber(s)
  if v == nil then
    if s == 'inf' or s == '+inf' then
      return math.huge
    end
    return nil
  end
  if v == math.huge or (v >= 0 and v <= latest and v % 1 == 0) then
    return v
  end
  return nil
end
local cap = tonumber(r[1])
if cap == nil or cap >= 0 or cap < -9007199254740991 or cap % 1 ~= 0 then
  return redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
end
cap = -cap
local records = 1
for i = 2, 3 do
  if r[i] then
    local x = tonumber(r[i])
    if x == nil or x >= 0 or x == -math.huge then
      return redis.error_reply(outside)
    end
    records = records + 1
  end
end
local draining = false
if drain_rec then
  local x = tonumber(drain_rec)
  if x == nil or x >= 0 or x == -math.huge then
    return redis.error_reply(outside)
  end
  draining, records = true, records + 1
end
local mine_at, stone = nil, false
if mine then
  -- expiry(mine), inline (a call costs more), then a tombstone's score
  -- (semaphore_abandon): in (-1, 0) and expiring within two minutes; or
  -- outside the layout.
  local x = tonumber(mine)
  if x ~= nil and x >= 0 and (x == math.huge or (x <= latest and x % 1 == 0)) then
    mine_at = x
  elseif x == nil and (mine == 'inf' or mine == '+inf') then
    mine_at = math.huge
  elseif x == nil or x <= -1 or x >= 0 then
    return redis.error_reply(outside)
  else
    stone = math.floor(-x * 8796093022208 + 0.5)
    if stone > now + 120000 then
      return redis.error_reply(outside)
    end
  end
end
