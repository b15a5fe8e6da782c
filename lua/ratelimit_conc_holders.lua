-- ratelimit_conc_holders: list a concurrency limiter's live leases
-- (ConcurrencyLimiter.Holders reads it; ConcurrencyLimiter.Adopt and
-- ForceRelease look the token up in it). Writes nothing: expired leases
-- are left out, not pruned; the settings member (scored below 0) and the
-- tombstones of abandoned acquisitions (members "0:...!", holding no
-- permit: ratelimit_conc_abandon) are not holders.
--
-- KEYS[1]  state key (layout in ratelimit_conc_acquire.lua)
--
-- Reply    {now_ms, member_1, pttl_1, member_2, pttl_2, ...}
--          now_ms is the server time the script ran at; then each live
--          lease's member ("<permits>:<token>") and its remaining TTL in
--          ms (>= 1), or -1 for a lease without expiry (scored +inf,
--          written by hand), earliest expiry first
-- Errors   WRONGTYPE       the key is not a sorted set
--          COORD_BADSTATE  a live member is not a lease, or its score is
--                          not an integer or +inf
local key = KEYS[1]
--#include time_ms
local live = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
local out = {now}
for i = 1, #live, 2 do
  local m, s = live[i], live[i + 1]
  local p = string.match(m, '^(%d+):.')
  if not p then
    return redis.error_reply('COORD_BADSTATE concurrency key holds a member that is not a lease')
  end
  if tonumber(p) > 0 then
    local left = -1
    if s ~= 'inf' and s ~= '+inf' then
      local v = tonumber(s)
      if v == nil or v % 1 ~= 0 or v == math.huge then
        return redis.error_reply('COORD_BADSTATE concurrency key holds a score outside its layout')
      end
      left = v - now
    end
    out[#out + 1] = m
    out[#out + 1] = left
  end
end
return out
