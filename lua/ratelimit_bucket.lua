-- ratelimit_bucket: one decision of a token-bucket limiter with the
-- server's clock, or an adjustment of a decision already made (settle a
-- reservation, refund a grant).
--
-- KEYS[1]  the limiter: a string "<cfg>|<tokens>|<refill>". cfg is
--          b:<limit>:<per>:<period>: per tokens are added every period
--          microseconds, up to limit; tokens may be negative (a debt from
--          charges); refill is when the current refill period started.
--          The key expires when the bucket is full again.
--#include rl_common.header
--#include rl_common.args
--#include rl_common.one
local al, c, p1, p2, p3, st, sr = 98, nil
if stored then
  c, p1, p2, p3, st, sr = string.match(v, '^(b:(%d+):(%d+):(%d+))|(%-?%d+)|(%d+)$')
end
--#include rl_common.foreign
--#include rl_common.cfg3
--#include rl_common.clock
local lim, per, period, tk, r
--#include rl_bucket.load
--#include rl_bucket.refund
--#include rl_bucket.wait
--#include rl_common.decide
if answer then
--#include rl_bucket.sum
--#include rl_common.answer
end
--#include rl_bucket.take
--#include rl_bucket.sum
--#include rl_common.store
