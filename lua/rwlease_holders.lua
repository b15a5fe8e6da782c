-- rwlease_holders: list a read-write lease's live holders (RWMutex.Holders
-- reads it; RWMutex.Adopt and ForceRelease look the token up in it).
-- Writes nothing: expired entries are left out, not pruned; waiting
-- writers' markers ("Q:<token>", scored below 0) are not holders.
--
-- KEYS[1]  read-write lease key (layout in rwlease_acquire.lua)
--
-- Reply    {now_ms, member_1, pttl_1, member_2, pttl_2, ...}
--          now_ms is the server time the script ran at; then each live
--          holder's member ("R:<token>" or "W:<token>") and its remaining
--          TTL in ms (>= 1), earliest expiry first
-- Errors   WRONGTYPE       the key is not a sorted set
--          COORD_BADSTATE  a live entry is not R:<token> or W:<token>, or
--                          its score is not an integer
local key = KEYS[1]
--#include time_ms
local live = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
local out = {now}
for i = 1, #live, 2 do
  local m, v = live[i], tonumber(live[i + 1])
  local kind = string.sub(m, 1, 2)
  if (kind ~= 'R:' and kind ~= 'W:') or #m < 3 or v == nil or v % 1 ~= 0 or v == math.huge then
    return redis.error_reply('COORD_BADSTATE read-write lease key holds an entry outside its layout')
  end
  out[#out + 1] = m
  out[#out + 1] = v - now
end
return out
