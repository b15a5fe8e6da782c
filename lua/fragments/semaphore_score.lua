-- fragment semaphore_score: the function expiry(s), for the scores a
-- semaphore script reads besides its records and its caller's own (the
-- earliest live permit's, the next latest's), included in the branch that
-- reads them: a local function is a closure built on each run. Uses latest
-- (semaphore_state).
-- expiry returns the expiry a permit's score s (as a reply gives it)
-- stands for, math.huge for +inf, or nil when s is outside the layout (or
-- missing).
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
