-- latch_read: read the state of a latch generation. Writes nothing.
--
-- KEYS[1]  latch key (layout in latch_create.lua)
-- ARGV[1]  id of the caller's generation
--
-- Reply    {1, count, deadline_in_ms, now_ms}  the caller's generation is
--                                  current; count 0 means complete;
--                                  deadline_in_ms is the time left before
--                                  it breaks (-1: no deadline, or complete)
--          {2, 0, -1, now_ms}      stale: the key holds another generation
--          {3, 0, -1, now_ms}      no latch at the key
--          {5, count, -1, now_ms}  broken: the deadline passed with count > 0
-- Errors   WRONGTYPE       the key is not a hash (raised by HMGET)
--          COORD_BADSTATE  the hash is not a latch: a field missing or out
--                          of range (checked by the fragment latch_state)
local key = KEYS[1]

--#include time_ms
--#include latch_state

local st, bad = latch_state()
if bad then
  return bad
end
if not st then
  return {3, 0, -1, now}
end
if st.id ~= ARGV[1] then
  return {2, 0, -1, now}
end
local c, d = st.count, st.deadline
if c == 0 or d == 0 then
  return {1, c, -1, now}
end
if now >= d then
  return {5, c, -1, now}
end
return {1, c, d - now, now}
