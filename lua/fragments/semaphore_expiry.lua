-- fragment semaphore_expiry: the semaphore key's TTL after a permit's
-- expiry changed.
-- expire_latest makes the key expire with its latest permit.
local function expire_latest()
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, top[2])
end
-- extend makes the key live at least until score (a permit's expiry). A
-- key without a TTL holds a permit without expiry: GT keeps it so. When GT
-- changed nothing, a key left without a TTL by an operator (PERSIST, a
-- RESTORE without TTL) while no permit lacks an expiry gets its TTL back:
-- the latest permit's.
local function extend(score)
  if redis.call('PEXPIREAT', key, score, 'GT') == 0 and redis.call('PEXPIRETIME', key) == -1 and
      redis.call('ZCOUNT', key, '+inf', '+inf') == 0 then
    expire_latest()
  end
end
