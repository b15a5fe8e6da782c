-- fragment notify: the function wake(message[, suffix]) that wakes the
-- waiters of KEYS[1] (with suffix: of one part of it, a hash field), best
-- effort: a user whose ACL forbids the channel still releases, and its
-- waiters fall back to expiry and periodic re-checks. The shard channel
-- lies in the key's Cluster slot, so that a sharded publication is
-- delivered by the key's own shard instead of every node of a cluster:
-- "coordination:", the key, then the suffix when the key has a hash tag;
-- "coordination:", the key, the key again in braces (as a hash tag), then
-- the suffix when it holds neither '{' nor '}'. wake publishes on it with
-- SPUBLISH, and with PUBLISH on the classic channel ("coordination:", the
-- key, the suffix) when the server refuses SPUBLISH (no sharded Pub/Sub
-- before Redis 7.0, an ACL without it) or when the key has no shard
-- channel (braces that form no hash tag). The Go side names the same
-- channels (internal/slot Channels).
local function wake(message, suffix)
  local key = KEYS[1]
  suffix = suffix or ''
  local open = string.find(key, '{', 1, true)
  local shard
  if open then
    local close = string.find(key, '}', open + 1, true)
    if close and close > open + 1 then
      shard = 'coordination:' .. key .. suffix
    end
  elseif key ~= '' and not string.find(key, '}', 1, true) then
    shard = 'coordination:' .. key .. '{' .. key .. '}' .. suffix
  end
  if shard then
    local r = redis.pcall('SPUBLISH', shard, message)
    if type(r) ~= 'table' or not r.err then
      return
    end
  end
  redis.pcall('PUBLISH', 'coordination:' .. key .. suffix, message)
end
