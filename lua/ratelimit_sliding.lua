-- ratelimit_sliding: take permits from a segmented sliding window.
--
-- Time is cut into segments of seg_ms = ceil(window_ms / segments), aligned
-- to server time (segment i covers [i*seg_ms, (i+1)*seg_ms)). Permits taken
-- in segment i are charged until (i+1)*seg_ms + window_ms: never less than
-- window_ms after they were taken, and at most one segment longer. So no
-- span of window_ms ever admits more than limit permits.
--
-- KEYS[1]  state key: a hash with fields
--            c      "s:<limit>:<window_ms>:<segments>" (the settings)
--            n      permits charged in the live segments
--            o      oldest segment index that may hold permits
--            l      newest segment index written
--            <s>    permits taken in segment i (o <= i <= l), stored in
--                   ring slot s = i mod (segments + 3): live segments
--                   never span more than segments + 2 indices, so slots
--                   are unique, and their names stay small integers
--          The key expires when the newest segment's permits are returned.
-- ARGV[1]  limit: permits per window (integer >= 1)
-- ARGV[2]  window length in milliseconds (integer >= 1)
-- ARGV[3]  segments per window (integer 1..1024)
-- ARGV[4]  permits requested (integer >= 0); 0 probes without consuming
--
-- Reply    {acquired, available, retry_ms}
--          acquired   1 when the permits were taken (probe: one is free)
--          available  permits free after this call
--          retry_ms   when not acquired: milliseconds until enough permits
--                     are returned to admit the request; -1 when acquired
--                     or when permits > limit
-- Writes   only when permits >= 1 are taken (expired segments are dropped
--          then). Rejections, probes and oversized requests write nothing.
-- Errors (raised before anything is written):
--   COORD_BADARG            an argument is not an integer in range
--   WRONGTYPE               the key holds a non-hash value (raised by HMGET)
--   COORD_CONFIG_MISMATCH   the hash holds other settings
--   COORD_BADSTATE          a field is missing or malformed
-- Not idempotent: a re-sent call (go-redis retries after a lost reply) takes
-- the permits again. Use a client with MaxRetries: -1 to avoid that.
local limit, window, segs, permits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not (limit and window and segs and permits) or limit < 1 or window < 1 or segs < 1 or segs > 1024
    or permits < 0 or limit % 1 ~= 0 or window % 1 ~= 0 or segs % 1 ~= 0 or permits % 1 ~= 0 then
  return redis.error_reply('COORD_BADARG limit, window, segments and permits must be integers (>= 1, >= 1, 1..1024, >= 0)')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local cfg = 's:' .. ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3]
local seg = (window + segs - 1 - (window + segs - 1) % segs) / segs
local ring = segs + 3
local h = redis.call('HMGET', KEYS[1], 'c', 'n', 'o', 'l')
local k = (now - now % seg) / seg -- the current segment
local cut = now - window
cut = (cut - cut % seg) / seg -- segments below cut have returned their permits
local used, o, l = 0, k, k
local reset = false
local drop = nil
if h[1] then
  if h[1] ~= cfg then
    return redis.error_reply('COORD_CONFIG_MISMATCH key holds another limiter or other settings')
  end
  used, o, l = tonumber(h[2]), tonumber(h[3]), tonumber(h[4])
  if not (used and o and l) or used < 0 or used % 1 ~= 0 or o % 1 ~= 0 or l % 1 ~= 0
      or o > l + 1 or l - o > segs + 2 then
    return redis.error_reply('COORD_BADSTATE sliding-window state is malformed')
  end
  if k < l then
    k = l -- the clock went back: never charge a segment older than the newest
  end
  if l < cut then
    used, o, l, reset = 0, k, k, true
  elseif o < cut then
    local names = {}
    for i = o, cut - 1 do
      names[#names + 1] = i % ring
    end
    local vals = redis.call('HMGET', KEYS[1], unpack(names))
    drop = {}
    for i = 1, #names do
      if vals[i] then
        local x = tonumber(vals[i])
        if not x or x < 0 then
          return redis.error_reply('COORD_BADSTATE sliding-window segment is malformed')
        end
        used = used - x
        drop[#drop + 1] = names[i]
      end
    end
    if used < 0 then
      return redis.error_reply('COORD_BADSTATE sliding-window total is below its segments')
    end
    o = cut
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('COORD_BADSTATE sliding-window hash lacks its settings')
end
local available = limit - used
if available < 0 then
  available = 0
end
local want = permits -- the request is refused unless available >= want
if permits == 0 then
  want = 1
end
if permits > limit then
  return {0, available, -1}
end
if available < want then
  -- ms until want - available more permits are free: walk the live
  -- segments from the oldest; segment i returns at (i+1)*seg + window.
  local need = want - available
  local names = {}
  for i = o, l do
    names[#names + 1] = i % ring
  end
  local vals = redis.call('HMGET', KEYS[1], unpack(names))
  local freed = 0
  for j = 1, #names do
    freed = freed + (tonumber(vals[j]) or 0)
    if freed >= need then
      return {0, available, (o + j) * seg + window - now}
    end
  end
  return {0, available, (l + 1) * seg + window - now}
end
if permits == 0 then
  return {1, available, -1}
end
if reset then
  redis.call('DEL', KEYS[1])
elseif drop and #drop > 0 then
  redis.call('HDEL', KEYS[1], unpack(drop))
end
used = used + permits
redis.call('HINCRBY', KEYS[1], k % ring, permits)
redis.call('HSET', KEYS[1], 'c', cfg, 'n', used, 'o', o, 'l', k)
redis.call('PEXPIRE', KEYS[1], (k + 1) * seg + window - now)
return {1, limit - used, -1}
