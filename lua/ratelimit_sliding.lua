-- ratelimit_sliding: one decision of a segmented sliding-window limiter
-- with the server's clock, or an adjustment of a decision already made
-- (settle a reservation, refund a grant).
--
-- KEYS[1]  the limiter: a string "<cfg>|<n>|<o>|<l>|<c_o,...,c_l>".
--          cfg is s:<limit>:<window>:<segs>: time is cut into segments of
--          g = ceil(window/segs) microseconds, numbered from time 0;
--          segment i holds c_i permits, charged until (i+1)*g + window; n
--          is their sum, o the oldest and l the newest segment kept. The
--          key expires when the newest segment is no longer charged.
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
local al, c, p1, p2, p3, sn, so, sl, scs = 115, nil
if stored then
  c, p1, p2, p3, sn, so, sl, scs = string.match(v, '^(s:(%d+):(%d+):(%d+))|(%d+)|(%d+)|(%d+)|([%d,]+)$')
end
--#include rl_common.foreign
--#include rl_common.cfg3
--#include rl_common.clock
local lim, win, segs, g, n, o, l, cs
--#include rl_sliding.load
--#include rl_sliding.refund
--#include rl_sliding.wait
--#include rl_common.decide
if answer then
--#include rl_sliding.sum
--#include rl_common.answer
end
--#include rl_sliding.take
--#include rl_sliding.sum
--#include rl_common.store
