-- fragment released: what a release that removed its member does last,
-- for a sorted-set primitive (semaphore, read-write lease): waiters are
-- woken when notify is true (a best-effort PUBLISH on "coordination:"
-- followed by KEYS[1]). Uses notify.
if notify then
  redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
end
