-- latch_count_down: count a latch generation down by one.
--
-- KEYS[1]  latch key (layout in latch_create.lua)
-- ARGV[1]  id of the caller's generation
-- ARGV[2]  signal id: random per call, so that a re-sent request is
--          counted once
--
-- Reply    {1, remaining, now_ms}  counted down; remaining is the count
--                                  left (0: complete; waiters are notified
--                                  on the channel "coordination:"
--                                  followed by KEYS[1], best effort); also
--                                  for a re-sent signal, with the count it
--                                  left then
--          {2, 0, now_ms}          stale: the key holds another generation
--          {3, 0, now_ms}          no latch at the key
--          {4, 0, now_ms}          the generation is complete already
--          {5, count, now_ms}      the generation is broken: its deadline
--                                  passed with count > 0
--          Only reply 1 writes.
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a hash (raised by HMGET)
--   COORD_BADSTATE  the hash is not a latch: a field missing or out of
--                   range, or the record of a re-sent signal outside count
--                   to initial (checked by the fragment latch_state)
--#include notify
local key = KEYS[1]

--#include time_ms
--#include latch_state

local st, bad = latch_state(ARGV[2])
if bad then
  return bad
end
if not st then
  return {3, 0, now}
end
if st.id ~= ARGV[1] then
  return {2, 0, now}
end
if st.signal then
  return {1, st.signal, now}
end
local c, d = st.count, st.deadline
if c == 0 then
  return {4, 0, now}
end
if d > 0 and now >= d then
  return {5, c, now}
end
c = c - 1
redis.call('HSET', key, 'count', c, 's:' .. ARGV[2], c)
if c == 0 then
  wake('complete')
end
return {1, c, now}
