-- idempotency_abandon: end a pending claim owned by the caller so that
-- the next Begin starts afresh, and wake waiters. The claim becomes
-- 'A' <fence> ':' <abandon id> for 5 s (layout in idempotency_begin): a
-- free key that keeps the fence increasing and recognises a re-send.
--
-- KEYS[1]  claim key (layout in idempotency_begin)
-- ARGV[1]  owner token the caller got from idempotency_begin
-- ARGV[2]  abandon id: random, fresh per Abandon call, without ':';
--          recorded in the abandoned claim so that a re-send of the same
--          call is recognised
-- ARGV[3]  (the background cleanup of an ambiguous Begin only) how long
--          the abandoned claim lasts, in milliseconds (integer >= 1;
--          absent: 5000). ARGV[2] is then the Begin's owner token, and the
--          abandoned claim its tombstone: idempotency_begin refuses it to
--          that token (the Begin's request, if it reaches the server after
--          this cleanup, creates nothing) and any other caller takes the
--          key at once. So that the late request always meets it, the
--          cleanup also writes it on a key without a claim ('A', the
--          server's TIME in microseconds as the fence, ':', ARGV[2]) and
--          over another call's abandoned claim (its fence kept, the longer
--          of the two lives; that call's re-send then answers 0).
--
-- Reply    1  the caller's pending claim was abandoned; waiters are notified
--             on the channel 'coordination:' .. KEYS[1] (best effort). A
--             re-sent request (same abandon id) whose first run abandoned
--             the claim gets 1 again without any change (within the 5 s
--             the mark lasts, or ARGV[3]).
--          0  nothing changed: no claim (expired, or abandoned before),
--             a claim of another owner, a completed claim (a stored
--             result is never removed by Abandon) or a failed one (its
--             outcome is unknown: only idempotency_forget removes it).
--             With ARGV[3], on a key without a claim or abandoned by
--             another call, the tombstone is written (see ARGV[3]).
-- Errors (raised before anything is written):
--   COORD_BADARG     ARGV[3] is present and not an integer >= 1
--   WRONGTYPE        the key holds something other than a string (raised by
--                    GET; a claim of an earlier version is a hash)
--   COORD_BADSTATE   the string is not a claim (see idempotency_begin)
--#include notify
local life = 5000
if ARGV[3] then
  life = tonumber(ARGV[3])
  if not life or life < 1 or life % 1 ~= 0 then
    return redis.error_reply('COORD_BADARG the abandoned claim TTL must be an integer >= 1')
  end
end
local v = redis.call('GET', KEYS[1])
if v == false then
  if ARGV[3] then
    local t = redis.call('TIME')
    redis.call('SET', KEYS[1], 'A' .. t[1] .. string.format('%06d', tonumber(t[2])) .. ':' .. ARGV[2], 'PX', life)
  end
  return 0
end
local state = string.byte(v, 1)
if state == 80 then -- 'P'
  local fence, owner = string.match(v, '^P[^:]*:([1-9]%d*):([^:]+):')
  if not owner then
    return redis.error_reply('COORD_BADSTATE idempotency claim lacks its fence or owner')
  end
  if owner ~= ARGV[1] then
    return 0
  end
  redis.call('SET', KEYS[1], 'A' .. fence .. ':' .. ARGV[2], 'PX', life)
  wake('abandoned')
  return 1
elseif state == 67 then -- 'C'
  if not string.match(v, '^C[^:]+:') then
    return redis.error_reply('COORD_BADSTATE completed idempotency claim lacks its completion id')
  end
  return 0
elseif state == 65 then -- 'A': abandoned; by this call when a re-send
  local fence, id = string.match(v, '^A([^:]*):(.*)$')
  if id == ARGV[2] then
    return 1
  end
  if ARGV[3] and fence then
    redis.call('SET', KEYS[1], 'A' .. fence .. ':' .. ARGV[2], 'PX', math.max(redis.call('PTTL', KEYS[1]), life))
  end
  return 0
elseif state == 70 then -- 'F': failed (kept: its outcome is unknown)
  return 0
end
return redis.error_reply('COORD_BADSTATE idempotency key holds no claim')
