-- redlock_refresh: a Redlock node's refresh (plain lock nodes; the fencing
-- node refreshes with fencing_refresh): extend the caller's lock, or take
-- it again when the key is free on this node (the node restarted without
-- its data, or the key expired there while a quorum kept the lock), so
-- that the quorum heals node by node instead of shrinking with every
-- restart (as redsync's WithSetNXOnExtend). Another owner's lock is never
-- touched.
--
-- KEYS[1]  lock key (layout in lock_acquire)
-- ARGV[1]  owner token of the caller (never ends with '+')
-- ARGV[2]  new TTL in milliseconds (integer >= 1)
--
-- Reply    1  the caller holds the lock on this node: its TTL is now
--             ARGV[2] ms (the key was set to the caller's token if it was
--             free)
--          0  another owner holds it (nothing changed)
-- Errors   WRONGTYPE  the key holds a non-string value (raised by
--                     SET ... GET, which then writes nothing)
-- One command takes a free key or reads its holder (Redis 7.0+).
local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
if v == false then
  return 1
end
if v == ARGV[1] or v == ARGV[1] .. '+' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
