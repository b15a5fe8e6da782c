-- ratelimit_fixed: one decision of a fixed-window limiter with the
-- server's clock, or an adjustment of a decision already made (settle a
-- reservation, refund a grant).
--
-- KEYS[1]  the limiter: a string "<cfg>|<end_ms>|<used>". cfg is
--          f:<limit>:<window_ms> (windows start at the first charge),
--          f:<limit>:<window_ms>:e (windows start at multiples of
--          window_ms since the Unix epoch) or f:<limit>:0:<p>:<zone> (a
--          calendar period p: m minute, h hour, d day, M month, in the
--          time zone named zone, e.g. Europe/Berlin or UTC); the window
--          ends at end_ms (server milliseconds) and has used permits taken
--          (a charge may take it past the limit). The key expires when the
--          window ends.
-- ARGV[4]  (a calendar period only) the boundaries: "<b0>,<b1>,<b2>,<b3>",
--          four consecutive period starts in Unix ms, increasing, computed
--          by the caller around its clock; a new window is the one of
--          them that holds the server's time (none: COORD_CLOCK, raised
--          before anything is written).
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
local c, pl, se, su
if stored then
  c, pl, se, su = string.match(v, '^(f:(%d+):%d+)|([1-9]%d*)|(%d+)$')
  if not c then -- aligned
    c, pl, se, su = string.match(v, '^(f:(%d+):%d+:[%w:/_+.-]+)|([1-9]%d*)|(%d+)$')
  end
end
--#include rl_common.foreign
local lim, win, e, u, fe, ax, bs = nil, nil, nil, nil, true -- bs: ARGV[4], read where needed
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
