import { FENCE_LUA } from '../redis/fenced-writes.js';

/**
 * A credit balance in Redis, in two keys in its owner's slot: the state hash (`b` the balance, `h`
 * the UTC hour, as an index, whose spend is still open, `u` that hour's spend so far (net of
 * refunds), `p` the last hour closed with a spend and `q` what a late refund may still give back
 * of it, `r` the latest refill period seen (refilled once per start instant), `x` present once `credits.exhausted` was announced and
 * until credits come back, `m` the balance just after the last top-up, grant or upward adjustment
 * (what `credits.low` measures a balance without a refill against), and `i:<ref>` per entry made under a reference, the entry's stream id)
 * and the ledger stream (one entry per change: type, amount, at, and per type end, period, reason,
 * ref). The balance is always the sum of the ledger's amounts less the open hour's spend.
 *
 * CREDIT_STATE defines, for the scripts that embed it: creditsRead(hash, stream, now, refill amount,
 * refill period), which closes a past hour's spend into the ledger and applies a refill due in
 * this period (bringing the balance up to the amount), creditsExhaust(state, balance, cost) and
 * creditsSave(hash, state).
 *
 * `x` is how `credits.exhausted` is sent once: the call that sets it (a request refused for
 * credits, the balance reaching 0) is the one that announces, and every script on a balance runs
 * alone, so exactly one call sets it, whichever replica made it. A refill that raises the balance
 * and a top-up, grant or upward adjustment clear it; a refund does not (it gives back what an
 * unserved request took: clearing on it would re-announce every upstream failure at the bottom of
 * a balance).
 */
export const CREDIT_STATE = `
-- The start (epoch ms) a refill period's name ends with: 'period:<start ms>' or 'day:<start ms>'.
local function periodStart(name)
  return tonumber(string.match(name, ':(%-?%d+)$')) or -1
end
local function creditsRead(ck, cl, now, amount, period)
  local s = redis.call('HMGET', ck, 'b', 'h', 'u', 'r', 'x', 'm')
  local st = {b = tonumber(s[1] or '0'), h = tonumber(s[2] or '0'), u = tonumber(s[3] or '0'), r = s[4] or ''}
  st.x = s[5] ~= false
  st.x0 = st.x
  st.m = tonumber(s[6] or '0')
  st.dirty = false
  st.refilled = 0
  local hour = math.floor(now / 3600000)
  -- A replica whose clock is a little behind spends into the hour already open.
  if hour > st.h then
    if st.u > 0 then
      redis.call('XADD', cl, '*', 'type', 'spend', 'amount', string.format('%d', -st.u),
        'at', string.format('%d', st.h * 3600000), 'end', string.format('%d', (st.h + 1) * 3600000))
      redis.call('HSET', ck, 'p', string.format('%d', st.h), 'q', string.format('%d', st.u))
      st.dirty = true
    end
    st.u = 0
    st.h = hour
  end
  -- Keyed on the period's start instant, not its name (refillDue in credit-terms.ts): a period
  -- starting no later than the last one refilled is not refilled again, whatever its name.
  if amount > 0 and period ~= '' and (st.r == '' or periodStart(period) > periodStart(st.r)) then
    st.r = period
    st.dirty = true
    if st.b < amount then
      st.refilled = amount - st.b
      st.b = amount
      st.x = false
      redis.call('XADD', cl, '*', 'type', 'refill', 'amount', string.format('%d', st.refilled),
        'at', string.format('%d', now), 'period', period)
    end
  end
  return st
end
-- The first call that finds the balance cannot pay (a cost refused; 0: it reached 0) marks it:
-- st.ex is then what to announce, {balance, cost}; a marked balance announces nothing more.
local function creditsExhaust(st, balance, cost)
  if st.x then return end
  st.x = true
  st.dirty = true
  st.ex = {balance, cost}
end
local function creditsSave(ck, st)
  if st.x and not st.x0 then
    redis.call('HSET', ck, 'b', string.format('%d', st.b), 'h', string.format('%d', st.h),
      'u', string.format('%d', st.u), 'r', st.r, 'x', '1')
  else
    redis.call('HSET', ck, 'b', string.format('%d', st.b), 'h', string.format('%d', st.h),
      'u', string.format('%d', st.u), 'r', st.r)
    if st.x0 and not st.x then redis.call('HDEL', ck, 'x') end
  end
end
`;

/**
 * The ledger's trim, for its own scripts only (the limit script never trims: it stays as short as
 * it was). creditsTrim(hash, stream, cutoff) deletes up to `batch` entries written before `cutoff`
 * (epoch ms) and adds their sum to the hash's `o` (the opening balance), with `oi` the newest
 * deleted entry's id, in the same script: the stream plus the opening always sum to the balance
 * less the open hour. A deleted entry's reference (`i:<ref>`) goes with it.
 */
const CREDIT_TRIM = `
local function creditsTrim(ck, cl, cutoff, batch)
  if cutoff <= 0 then return end
  local old = redis.call('XRANGE', cl, '-', string.format('%d', cutoff - 1), 'COUNT', batch)
  if #old == 0 then return end
  local sum, ids = 0, {}
  for _, e in ipairs(old) do
    ids[#ids + 1] = e[1]
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'amount' then sum = sum + tonumber(f[i + 1]) end
      if f[i] == 'ref' then redis.call('HDEL', ck, 'i:' .. f[i + 1]) end
    end
  end
  redis.call('XDEL', cl, unpack(ids))
  redis.call('HINCRBY', ck, 'o', string.format('%d', sum))
  redis.call('HSET', ck, 'oi', ids[#ids])
end
`;

/**
 * Adds one entry made under a reference (a top-up, grant or adjustment): once per reference, so a
 * retry adds nothing more; refused (the balance left as it is) when it would take the balance
 * below zero. KEYS: state hash, ledger stream. ARGV: now, refill amount (0: none), refill period,
 * reference, type, amount, reason, at (epoch ms), the trim's cutoff (epoch ms; 0: none) and batch,
 * the fence's deadline (µs on Redis's clock: past it, the script does nothing and answers the
 * FENCED error, so a change the admin API answered 503 cannot land later; redis/fenced-writes.ts).
 * Returns: 'added', 'held' (made before) or
 * 'short'; the entry's id (or ''); the balance; what a refill due now added; 1 when this change
 * took the balance to 0 and so announces `credits.exhausted` (else 0); `m` (0: none).
 */
export const CREDIT_ADD_SCRIPT = `${CREDIT_STATE}${CREDIT_TRIM}${FENCE_LUA}
local late = fenceRefusal(ARGV[11])
if late then return late end
local ck, cl = KEYS[1], KEYS[2]
local st = creditsRead(ck, cl, tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3])
creditsTrim(ck, cl, tonumber(ARGV[9]), tonumber(ARGV[10]))
local held = redis.call('HGET', ck, 'i:' .. ARGV[4])
local delta = tonumber(ARGV[6])
local outcome, id = 'held', held or ''
if not held then
  if st.b + delta < 0 then
    outcome = 'short'
  else
    outcome = 'added'
    st.b = st.b + delta
    st.dirty = true
    -- Credits came back: the balance may announce again; an adjustment down to 0 announces.
    if delta > 0 then
      st.x = false
      st.m = st.b
      redis.call('HSET', ck, 'm', string.format('%d', st.b))
    elseif st.b == 0 then
      creditsExhaust(st, 0, 0)
    end
    id = redis.call('XADD', cl, '*', 'type', ARGV[5], 'amount', ARGV[6], 'at', ARGV[8], 'reason', ARGV[7], 'ref', ARGV[4])
    redis.call('HSET', ck, 'i:' .. ARGV[4], id)
  end
end
if st.dirty then creditsSave(ck, st) end
local announce = 0
if st.ex then announce = 1 end
return {outcome, id, st.b, st.refilled, announce, st.m}
`;

/**
 * The balance now: a past hour closed and a refill due applied first, the ledger trimmed. KEYS
 * and the first three ARGV as CREDIT_ADD_SCRIPT, then the trim's cutoff and batch. Returns: the balance, the open hour's spend, that hour (an index of
 * UTC hours), what a refill due now added.
 */
export const CREDIT_BALANCE_SCRIPT = `${CREDIT_STATE}${CREDIT_TRIM}
local st = creditsRead(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3])
creditsTrim(KEYS[1], KEYS[2], tonumber(ARGV[4]), tonumber(ARGV[5]))
if st.dirty then creditsSave(KEYS[1], st) end
return {st.b, st.u, st.h, st.refilled}
`;

/**
 * Gives back credits spent by requests the upstream never served (CreditLedger.refund): at most
 * the open hour's spend, or, for the hour last closed, what is left of its spend (a `refund`
 * entry). KEYS and the first three ARGV as CREDIT_ADD_SCRIPT; then the hour (an index of UTC
 * hours) the requests were admitted in, the units, and the fence's deadline (past it: nothing,
 * the FENCED error). A third key, the refund's mark (with ARGV[7], its expiry in epoch ms): a
 * refund whose mark exists gives nothing back (a spooled refund replayed again). Returns: what
 * was given back, the balance.
 */
export const CREDIT_REFUND_SCRIPT = `${CREDIT_STATE}${FENCE_LUA}
local late = fenceRefusal(ARGV[6])
if late then return late end
local ck, cl = KEYS[1], KEYS[2]
local st = creditsRead(ck, cl, tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3])
local hour, units = tonumber(ARGV[4]), tonumber(ARGV[5])
if KEYS[3] and not redis.call('SET', KEYS[3], '1', 'NX', 'PXAT', ARGV[7]) then units = 0 end
local back = 0
if hour >= st.h then
  back = math.min(units, st.u)
  st.u = st.u - back
else
  local closed = redis.call('HMGET', ck, 'p', 'q')
  if tonumber(closed[1] or '-1') == hour then
    back = math.min(units, tonumber(closed[2] or '0'))
    if back > 0 then
      redis.call('HSET', ck, 'q', string.format('%d', tonumber(closed[2]) - back))
      redis.call('XADD', cl, '*', 'type', 'refund', 'amount', string.format('%d', back),
        'at', string.format('%d', hour * 3600000), 'end', string.format('%d', (hour + 1) * 3600000))
    end
  end
end
if back > 0 then
  st.b = st.b + back
  st.dirty = true
end
if st.dirty then creditsSave(ck, st) end
return {back, st.b}
`;
