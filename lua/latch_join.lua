-- latch_join: read the current generation of a latch. Writes nothing.
--
-- KEYS[1]  latch key (layout in latch_create.lua)
--
-- Reply    {id, gen, count, initial, deadline_ms, now_ms}  the current
--                                  generation (id is a string, the rest
--                                  integers; deadline_ms 0 for none)
--          false                   no latch at the key
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
  return false
end
return {st.id, st.gen, st.count, st.initial, st.deadline, now}
