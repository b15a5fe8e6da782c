-- fragment latch_state: read and check the latch hash at key (layout in
-- latch_create.lua), for every latch script, before it writes anything.
-- latch_state(sid) reads the fields id, gen, count, initial and deadline,
-- and the count-down record s:<sid> when sid is given, with one HMGET
-- (redis.call: a key of another type raises WRONGTYPE). It returns
--   nil, nil  the key does not exist
--   st, nil   the latch: st.id (a non-empty string), st.gen (1 to 2^53-1),
--             st.initial (0 to 2^53-1), st.count (0 to initial),
--             st.deadline (server ms, 0 for none; 0 to 2^53-1) and
--             st.signal (the count the count-down sid left, count to
--             initial; nil when sid is not recorded or not given)
--   nil, err  the key holds a hash that is not a latch (a field missing,
--             or not a decimal integer in its range): err is the
--             COORD_BADSTATE error reply, which the caller returns at once
local function latch_int(s, most)
  if type(s) ~= 'string' or #s > 16 or not string.match(s, '^%d+$') then
    return nil
  end
  local n = tonumber(s)
  if n > most then
    return nil
  end
  return n
end
local function latch_state(sid)
  local v
  if sid then
    v = redis.call('HMGET', key, 'id', 'gen', 'count', 'initial', 'deadline', 's:' .. sid)
  else
    v = redis.call('HMGET', key, 'id', 'gen', 'count', 'initial', 'deadline')
  end
  if not (v[1] or v[2] or v[3] or v[4] or v[5]) and redis.call('EXISTS', key) == 0 then
    return nil, nil
  end
  local max = 9007199254740991
  local initial = latch_int(v[4], max)
  local st = {id = v[1], gen = latch_int(v[2], max), initial = initial, deadline = latch_int(v[5], max)}
  if initial then
    st.count = latch_int(v[3], initial)
  end
  local bad = redis.error_reply('COORD_BADSTATE latch key holds a hash that is not a latch')
  if type(st.id) ~= 'string' or st.id == '' or not st.gen or st.gen < 1 or not st.count or not st.deadline then
    return nil, bad
  end
  if v[6] then
    st.signal = latch_int(v[6], initial)
    if not st.signal or st.signal < st.count then
      return nil, bad
    end
  end
  return st, nil
end
