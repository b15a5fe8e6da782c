-- ratelimit_fixed: one decision of a fixed-window limiter with the
-- server's clock, or an adjustment of a decision already made (settle a
-- reservation, refund a grant).
--
-- KEYS[1]  the limiter: a string "<cfg>|<end_ms>|<used>". cfg is
--          f:<limit>:<window_ms>; the window ends at end_ms (server
--          milliseconds) and has used permits taken (a charge may take it
--          past the limit). The key expires when the window ends.
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
local c, pl, se, su
if stored then
  c, pl, se, su = string.match(v, '^(f:(%d+):%d+)|([1-9]%d*)|(%d+)$')
end
--#include rl_common.foreign
local lim, win, e, u, fe = nil, nil, nil, nil, true
--#include rl_fixed.load
--#include rl_fixed.refund
--#include rl_fixed.wait
--#include rl_common.decide
if answer then
--#include rl_fixed.sum
--#include rl_common.answer
end
--#include rl_fixed.take
--#include rl_fixed.sum
if mk then
  gm = tonumber(e)
end
--#include rl_common.store
