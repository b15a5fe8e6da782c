-- latch_create: create a countdown latch, or replace it with a new
-- generation (reset).
--
-- Layout of the latch key (a hash; one key, no hash tag needed):
--   id        random id of the current generation (chosen by its creator)
--   gen       generation number: 1 for a created latch, +1 per reset
--   count     count-downs still needed (0: complete)
--   initial   the generation's starting count
--   deadline  server-time ms after which the generation is broken if its
--             count is not 0 yet; 0 for no deadline
--   s:<sid>   one per accepted count-down (sid is random per call): the
--             count it left, so that a re-sent count-down is not counted
--             twice
--
-- KEYS[1]  latch key
-- ARGV[1]  id of the new generation
-- ARGV[2]  count (integer >= 0)
-- ARGV[3]  deadline in ms from now (integer >= 1), or 0 for none
-- ARGV[4]  key TTL in ms (integer >= 1), or 0 to keep the key until deleted
-- ARGV[5]  "create" (fail if a latch exists) or "reset" (create or replace)
--
-- Reply    {1, gen, count, deadline_ms, now_ms}  created or reset; also when
--                                  the key already holds generation ARGV[1]
--                                  (a re-sent request): nothing changes.
--                                  A new generation wakes the waiters of
--                                  older ones on the channel
--                                  "coordination:" followed by KEYS[1]
--                                  (best effort).
--          {0, gen, count, deadline_ms, now_ms}  "create" found a latch:
--                                  its current generation; nothing changed
-- Errors (raised before anything is written):
--   WRONGTYPE       the key is not a hash (raised by HMGET)
--   COORD_BADARG    ARGV[5] is neither "create" nor "reset"
--   COORD_BADSTATE  the hash is not a latch: a field missing or out of
--                   range (checked by the fragment latch_state)
--#include notify
local key = KEYS[1]
if ARGV[5] ~= 'create' and ARGV[5] ~= 'reset' then
  return redis.error_reply('COORD_BADARG mode is neither create nor reset')
end

--#include time_ms
--#include latch_state

local gen = 0
local st, bad = latch_state()
if bad then
  return bad
end
if st then
  if st.id == ARGV[1] or ARGV[5] == 'create' then
    local ok = 0
    if st.id == ARGV[1] then
      ok = 1
    end
    return {ok, st.gen, st.count, st.deadline, now}
  end
  gen = st.gen
end

local count = tonumber(ARGV[2])
local deadline = 0
if tonumber(ARGV[3]) > 0 then
  deadline = now + tonumber(ARGV[3])
end
redis.call('DEL', key)
redis.call('HSET', key, 'id', ARGV[1], 'gen', gen + 1, 'count', ARGV[2], 'initial', ARGV[2],
  'deadline', string.format('%d', deadline))
if tonumber(ARGV[4]) > 0 then
  redis.call('PEXPIRE', key, ARGV[4])
end
-- Wake waiters of an older generation (replaced, or deleted and created
-- again): they re-read and return false.
wake('reset')
return {1, gen + 1, count, deadline, now}
