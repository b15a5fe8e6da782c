-- fragment semaphore_state: the semaphore key's scores checked against its
-- layout (semaphore_acquire.lua) before anything is written. A permit's
-- score is its expiry in server-time ms: an integer >= 0 that no TTL puts
-- past now + 9223372036855 (the longest time.Duration in ms, rounded up),
-- or +inf (no expiry). The records are the only members scored below 0;
-- the capacity record's score is -capacity, an integer with
-- 1 <= capacity <= 2^53-1. Uses key and now (time_ms).
local latest = now + 9223372036855
-- capacity_of returns the capacity recorded by c, the capacity record's
-- score as a reply gives it, or nil when c is not a valid record.
local function capacity_of(c)
  local v = tonumber(c)
  if v == nil or v >= 0 or v < -9007199254740991 or v ~= math.floor(v) then
    return nil
  end
  return -v
end
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
  if v == math.huge or (v >= 0 and v <= latest and v == math.floor(v)) then
    return v
  end
  return nil
end
-- bad_scores returns true when the key holds a score outside the layout:
-- a member below 0 that is not one of the records (records: how many of
-- "capacity", "multi" and "waiting" the key holds), a finite score past
-- latest, or a non-integer among the two latest finite expiries (a change
-- of one permit leaves one of them as the key's TTL) and mine (the
-- caller's member's score, false when it has none). O(log N).
local function bad_scores(records, mine)
  -- The largest double bounds the finite scores: an exclusive '(+inf' is
  -- read as inclusive by miniredis.
  local bound = string.format('%d', latest)
  if redis.call('ZCOUNT', key, '-inf', '(0') ~= records or
      redis.call('ZCOUNT', key, '(' .. bound, '1.7976931348623157e308') ~= 0 then
    return true
  end
  local top = redis.call('ZRANGE', key, bound, 0, 'BYSCORE', 'REV', 'LIMIT', 0, 2, 'WITHSCORES')
  for i = 2, #top, 2 do
    if expiry(top[i]) == nil then
      return true
    end
  end
  return mine and expiry(mine) == nil
end
-- checked returns the capacity and the number of records the key holds,
-- given r, the ZMSCORE reply of its 'capacity' record and its two other
-- records (in either order), and mine, the caller's member's score (false
-- when it has none); or nil and the COORD_BADSTATE error reply when the
-- capacity record or a score is outside the layout.
local function checked(r, mine)
  local c = capacity_of(r[1])
  if c == nil then
    return nil, redis.error_reply('COORD_BADSTATE semaphore key has no valid capacity record')
  end
  local records = 1
  if r[2] then
    records = records + 1
  end
  if r[3] then
    records = records + 1
  end
  if bad_scores(records, mine) then
    return nil, redis.error_reply('COORD_BADSTATE semaphore key holds a score outside its layout')
  end
  return c, records
end
