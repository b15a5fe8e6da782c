-- fragment released: what a release that removed its member does last,
-- for a sorted-set primitive (semaphore, read-write lease): waiters are
-- woken when notify is true (wake, of the fragment notify, which the
-- script includes before). Uses notify.
if notify then
  wake('released')
end
