-- idempotency_forget: delete an idempotency key whatever it holds (a
-- pending claim, a completed result, an abandoned claim's mark, a failed
-- claim), so that
-- the next Begin starts afresh, and wake callers waiting on it. An
-- operator's or an application's way out, never part of a request's own
-- life: a pending claim's work may still be running, and a retry after
-- this runs it again.
--
-- KEYS[1]  claim key (layout in idempotency_begin)
--
-- Reply    1  the key was deleted; waiters are notified on the channel
--             'coordination:' .. KEYS[1] (best effort)
--          0  there was no key (nothing changed)
-- Errors (raised before anything is written):
--   WRONGTYPE        the key holds something other than a string (raised by
--                    GET)
--   COORD_BADSTATE   the string does not start as a claim of one of the
--                    four forms does (see idempotency_begin): nothing is
--                    deleted
--#include notify
local v = redis.call('GET', KEYS[1])
if v == false then
  return 0
end
-- A claim of one of the four forms (layout in idempotency_begin), told
-- by its start; anything else is not deleted.
if not (string.find(v, '^P[1-9]%d*:[1-9]%d*:[^:]+:') or string.find(v, '^C[^:]+:')
    or string.find(v, '^A[1-9]%d*:') or string.find(v, '^F[1-9]%d*:[^:]+:')) then
  return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
end
redis.call('DEL', KEYS[1])
wake('forgotten')
return 1
