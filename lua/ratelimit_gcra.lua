-- ratelimit_gcra: one decision of a GCRA limiter (the Generic Cell Rate
-- Algorithm, ITU-T I.371, virtual scheduling) with the server's clock, or
-- an adjustment of a decision already made (settle a reservation, refund
-- a grant).
--
-- KEYS[1]  the limiter: a string "<cfg>|<a>|<b>". cfg is
--          g:<burst>:<q>:<d>: one permit every q/d microseconds, burst
--          permits at once; the theoretical arrival time is a + b/d
--          microseconds (0 <= b < d). The key expires when the arrival
--          time is past (the burst is back).
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
local al, c, p1, p2, p3, sa, sb = 103, nil
if stored then
  c, p1, p2, p3, sa, sb = string.match(v, '^(g:(%d+):(%d+):(%d+))|(%d+)|(%d+)$')
end
--#include rl_common.foreign
--#include rl_common.cfg3
--#include rl_common.clock
local x, q, d, span, a, b
--#include rl_gcra.load
--#include rl_gcra.refund
--#include rl_gcra.wait
--#include rl_common.decide
if answer then
--#include rl_gcra.sum
--#include rl_common.answer
end
--#include rl_gcra.take
--#include rl_gcra.sum
--#include rl_common.store
