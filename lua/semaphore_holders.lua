-- semaphore_holders: list a semaphore's live holders (Semaphore.Holders
-- reads it; Semaphore.Adopt and ForceRelease look the token up in it).
-- Writes nothing: expired permits are left out, not pruned; the records
-- (scored below 0) are not holders.
--
-- KEYS[1]  semaphore key (layout in semaphore_acquire.lua)
--
-- Reply    {now_ms, member_1, pttl_1, member_2, pttl_2, ...}
--          now_ms is the server time the script ran at; then each live
--          holder's member ("P:<n>:<token>") and its remaining TTL in ms
--          (>= 1), or -1 for a permit without expiry (scored +inf, written
--          by hand), earliest expiry first
-- Errors   WRONGTYPE       the key is not a sorted set
--          COORD_BADSTATE  a live member is not a permit, or its score is
--                          not an integer or +inf
local key = KEYS[1]
--#include time_ms
local live = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
local out = {now}
for i = 1, #live, 2 do
  local m, s = live[i], live[i + 1]
  local left = -1
  if s ~= 'inf' and s ~= '+inf' then
    local v = tonumber(s)
    if v == nil or v % 1 ~= 0 or v == math.huge then
      return redis.error_reply('COORD_BADSTATE semaphore key holds a score outside its layout')
    end
    left = v - now
  end
  if not string.match(m, '^P:%d+:.') then
    return redis.error_reply('COORD_BADSTATE semaphore key holds a member that is not a permit')
  end
  out[#out + 1] = m
  out[#out + 1] = left
end
return out
