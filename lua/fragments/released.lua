-- fragment released: what a release that removed its member does last,
-- for a sorted-set primitive (semaphore, read-write lease). Waiters are
-- woken when notify is true (wake, of the fragment notify, which the
-- script includes before); a live member's release is recorded in the mark,
-- KEYS[2] when given: a string holding member for 5 s, so that a re-sent
-- release finds its first send's. Uses notify, live and member.
if notify then
  wake('released')
end
if live and KEYS[2] then
  redis.call('SET', KEYS[2], member, 'PX', 5000)
end
