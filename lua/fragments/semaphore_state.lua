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
-- caller's member's score, false when it has none). Two calls, O(log N):
-- the two highest finite scores (the largest double bounds them: an
-- exclusive '(+inf' is read as inclusive by miniredis) include the
-- highest, so a score past latest is among them.
local function bad_scores(records, mine)
  if redis.call('ZCOUNT', key, '-inf', '(0') ~= records then
    return true
  end
  local top = redis.call('ZRANGE', key, '1.7976931348623157e308', 0, 'BYSCORE', 'REV', 'LIMIT', 0, 2, 'WITHSCORES')
  for i = 2, #top, 2 do
    if expiry(top[i]) == nil then
      return true
    end
  end
  return mine and expiry(mine) == nil
end
-- below0 reports whether a record's score as ZMSCORE gives it is below 0
-- (true for an absent record).
local function below0(s)
  local v = tonumber(s)
  return not s or (v ~= nil and v < 0)
end
-- checked returns the capacity and the number of records the key holds,
-- given r, the ZMSCORE reply of its 'capacity' record and its two other
-- records (in either order), mine, the caller's member's score (false
-- when it has none), and card, the key's ZCARD when the script read it
-- (else nil); or nil and the COORD_BADSTATE error reply when the capacity
-- record or a score is outside the layout. When card says the key holds
-- the records and mine alone, their scores are all there is to check: no
-- call is made.
local function checked(r, mine, card)
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
  local bad
  if card ~= nil and card == records + (mine and 1 or 0) then
    bad = not below0(r[2]) or not below0(r[3]) or (mine and expiry(mine) == nil)
  else
    bad = bad_scores(records, mine)
  end
  if bad then
    return nil, redis.error_reply('COORD_BADSTATE semaphore key holds a score outside its layout')
  end
  return c, records
end
