import { CREDIT_STATE } from '../../credits/credit-script.js';
import { PENDING_BUCKET_MS } from '../key-limiter.js';

/**
 * The call's deadline (the last ARGV, taken off first; 0: none), in Redis's clock: a call that
 * reaches Redis after it (a stall: Redis answers what it was sent meanwhile once it resumes)
 * does nothing and answers 'late', since the gateway has answered its requests without it by then.
 * Redis's time (ms) is also the reply's last element, for the gateway's estimate of the clocks.
 */
const DEADLINE = `
local deadline = tonumber(table.remove(ARGV))
local clock = redis.call('TIME')
local redisNow = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if deadline > 0 and redisNow > deadline then return {'late', redisNow} end
`;

/**
 * The windows: the arguments, what each window holds before the batch, and resetOf, when one
 * starts to give capacity back.
 */
const READ_WINDOWS = `
local nw = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local step = ${PENDING_BUCKET_MS}
local kind, limit, pa, pb, used = {}, {}, {}, {}, {}
local counters = {KEYS[nw + 1]}
for w = 1, nw do
  local p = 6 + 4 * w
  kind[w] = ARGV[p]
  limit[w] = tonumber(ARGV[p + 1])
  pa[w] = tonumber(ARGV[p + 2])
  -- Parsed only where read (tonumber is glibc's strtod: some 700 instructions each).
  if kind[w] == 's' then pb[w] = tonumber(ARGV[p + 3]) end
  if kind[w] ~= 's' and kind[w] ~= 'h' then counters[#counters + 1] = KEYS[w] end
end
local v = redis.call('MGET', unpack(counters))
local f = 1
local cur, from, low, live = {}, {}, {}, {}
for w = 1, nw do
  if kind[w] == 's' then
    cur[w] = math.floor(now / pa[w])
    from[w] = cur[w] - pb[w]
    local h = redis.call('HGETALL', KEYS[w])
    local sum, stale, l = 0, {}, {}
    for i = 1, #h, 2 do
      local idx = tonumber(h[i])
      if idx < from[w] then
        stale[#stale + 1] = h[i]
      else
        sum = sum + tonumber(h[i + 1])
        l[#l + 1] = idx
        if not low[w] or idx < low[w] then low[w] = idx end
      end
    end
    if #stale > 0 then redis.call('HDEL', KEYS[w], unpack(stale)) end
    used[w] = sum
    live[w] = h
  elseif kind[w] == 'h' then
    used[w] = tonumber(redis.call('HGET', KEYS[w], 'd') or '0')
  else
    f = f + 1
    used[w] = tonumber(v[f] or '0')
  end
end
local ttl = {}
local taken = 0
local function resetOf(w)
  if kind[w] == 'c' or kind[w] == 'h' then return pa[w] - now end
  if kind[w] == 's' then
    local oldest = low[w]
    if not oldest then oldest = cur[w] end
    return (oldest + pb[w] + 1) * pa[w] - now
  end
  if used[w] == 0 then return pa[w] end
  if not ttl[w] then ttl[w] = redis.call('PTTL', KEYS[w]) end
  if ttl[w] < 0 then return pa[w] end
  return ttl[w]
end
`;

/**
 * A ban's ms left at `now`, from the end its key holds: every reader then names the same end. A
 * key written as '1' (before bans kept their end), or an end this replica's clock is already past
 * while Redis still holds it, falls back to Redis's PTTL.
 */
const BAN_LEFT = `local function banLeft(value, key, now)
  local ends = tonumber(value)
  if ends and ends > now then return ends - now end
  return redis.call('PTTL', key)
end
`;

/**
 * The decision: each request in turn, admitted while every window has room for its cost; a
 * refusal counts toward a ban while its Retry-After runs, and the one past the threshold bans.
 */
const DECIDE = `local first = 10 + 4 * nw
local n = #ARGV - first + 1
local out = {}
local banTtl, startedAt = 0, 0
local banned = false
local refused = false
if v[1] then
  banned = true
  banTtl = banLeft(v[1], KEYS[nw + 1], now)
end
-- The refusals that count toward a ban: read on the batch's first one that counts.
local pending, last, added = nil, 0, {}
local function readPending()
  pending = 0
  local h = redis.call('HGETALL', KEYS[nw + 2])
  local gone = {}
  for i = 1, #h, 2 do
    local ends = tonumber(h[i])
    if ends * step > now then
      pending = pending + tonumber(h[i + 1])
      if ends > last then last = ends end
    else
      gone[#gone + 1] = h[i]
    end
  end
  if #gone > 0 then redis.call('HDEL', KEYS[nw + 2], unpack(gone)) end
end
-- The ban's arguments, parsed on the batch's first refusal: an admitted batch needs none.
local threshold, cap, grace, shortest = nil, nil, nil, nil
for i = 1, n do
  local c = tonumber(ARGV[first + i - 1])
  local fits = not banned
  -- A request of cost 0 (one its key may not make, asked only for the headers) takes nothing and
  -- is refused nothing: it never counts toward a ban.
  if fits and c > 0 then
    for w = 1, nw do
      if used[w] + taken + c > limit[w] then fits = false break end
    end
  end
  if banned then
    out[i] = 'B'
  elseif fits and not creditsCover(c) then
    -- Out of credits: refused, taking nothing, and counting toward no ban.
    out[i] = 'L'
    short[i] = true
    creditsShort(c)
  elseif fits then
    taken = taken + c
    out[i] = 'A'
  else
    refused = true
    out[i] = 'L'
    if not threshold then
      threshold, cap, grace, shortest = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[7])
    end
    if threshold >= 0 then
      -- What this refusal is told to wait, at least (settleBatch tells it no less).
      local wait = shortest
      for w = 1, nw do
        if used[w] + taken + c > limit[w] then wait = math.max(wait, resetOf(w)) end
      end
      local ends = math.floor((now + math.min(wait, cap) - grace) / step)
      if ends * step > now then
        if not pending then readPending() end
        pending = pending + 1
        added[ends] = (added[ends] or 0) + 1
        if pending > threshold then
          banned = true
          startedAt = i
          out[i] = 'B'
        end
      end
    end
  end
end
`;

/**
 * The credit balance, for a policy with credits (the last ARGV is then 'credits', after the refill
 * amount and period; the last two KEYS are the balance's hash and ledger stream, credit-script.ts):
 * read, a past hour's spend closed and a refill due applied. creditsCover(c): whether the balance
 * has room for a request of cost c once the batch's admitted requests are taken from it.
 * creditsShort(c): the mark of a request it cannot cover.
 */
const CREDITS_READ = `${CREDIT_STATE}
local credits = nil
local short = {}
if ARGV[#ARGV] == 'credits' then
  table.remove(ARGV)
  local period = table.remove(ARGV)
  local amount = tonumber(table.remove(ARGV))
  credits = creditsRead(KEYS[#KEYS - 1], KEYS[#KEYS], now, amount, period)
  credits.before = credits.b
end
local function creditsCover(c)
  return credits == nil or c == 0 or credits.b - taken >= c
end
-- A request of cost c the balance cannot cover marks it exhausted (creditsExhaust): as a spend to 0
-- when this batch's admitted requests took it there (as one call per request would have), else as
-- this refusal.
local function creditsShort(c)
  local left = credits.b - taken
  if taken > 0 and left == 0 then c = 0 end
  creditsExhaust(credits, left, c)
end
`;

/**
 * The credit balance: the admitted units spent from it into the open hour; the requests it could
 * not cover answered C (the history counted them as out of credits, `c`); a spend that leaves 0 marks it
 * exhausted (creditsExhaust), in the same HSET.
 */
const CREDITS_WRITE = `if credits then
  for i in pairs(short) do out[i] = 'C' end
  if taken > 0 then
    credits.b = credits.b - taken
    credits.u = credits.u + taken
    credits.dirty = true
    if credits.b == 0 then creditsExhaust(credits, 0, 0) end
  end
  if credits.dirty then creditsSave(KEYS[#KEYS - 1], credits) end
end
`;

/**
 * The windows: the admitted units taken from each, a new counter given its expiry. `fresh`: the
 * history hashes that got a new field here (a day window's `d`), whose expiry HISTORY sets.
 */
const TAKE = `local fresh = nil
if taken > 0 then
  for w = 1, nw do
    if kind[w] == 's' then
      redis.call('HINCRBY', KEYS[w], cur[w], taken)
      redis.call('PEXPIRE', KEYS[w], (pb[w] + 1) * pa[w])
      if not low[w] then low[w] = cur[w] end
    elseif kind[w] == 'h' then
      -- Its expiry is the history's, set below when the field is new.
      if redis.call('HINCRBY', KEYS[w], 'd', taken) == taken then
        fresh = fresh or {}
        fresh[KEYS[w]] = true
      end
    elseif redis.call('INCRBY', KEYS[w], taken) == taken then
      if kind[w] == 'f' then redis.call('PEXPIRE', KEYS[w], pa[w]) else redis.call('PEXPIREAT', KEYS[w], pa[w]) end
      ttl[w] = pa[w]
    end
  end
end
`;

/**
 * The ban: started, clearing the pending refusals, or the refusals of this batch kept.
 */
const BAN = `if startedAt > 0 then
  banTtl = tonumber(ARGV[5])
  -- The ban's end itself, so every read of it names the same instant (a PTTL read drifts by ms).
  redis.call('SET', KEYS[nw + 1], string.format('%d', now + banTtl), 'PX', ARGV[5])
  redis.call('DEL', KEYS[nw + 2])
elseif pending then
  for ends, count in pairs(added) do
    redis.call('HINCRBY', KEYS[nw + 2], string.format('%d', ends), count)
    if ends > last then last = ends end
  end
  -- Gone with its last step, whichever replica reads it next.
  redis.call('PEXPIRE', KEYS[nw + 2], string.format('%d', last * step - now))
end
`;

/**
 * The usage history: the batch's outcomes and units in the key's hour, and for a key of a
 * customer in the customer's hour too (the same hour, day and expiry).
 *
 * A hash's expiry is set when this call gives it a new field (HINCRBY answers the increment
 * itself), not on every call: one command less for nearly every decision. That is exact because
 * the expiry is a function of the field: ARGV[9] is fixed by the hash's day and the hour's
 * minutes past the UTC hour (RedisUsageHistory.expiry), which the field's name carries (`13a`,
 * `13:30a`), and every writer of a field (this script, and the history's own flush) sets the
 * expiry with it; Redis keeps a key's expiry through HINCRBY. So a hash whose field is already
 * there holds the expiry that field's writer set, and a hash deleted comes back with new fields,
 * and with its expiry. What still moves it: a retention changed in the configuration applies to
 * today's hash from its next new field (the next hour's first decision) instead of its next call.
 */
const HISTORY = `local hour = ARGV[8]
if hour ~= '' then
  local counts = {a = 0, l = 0, b = 0, c = 0, f = 0}
  for i = 1, n do
    local o = 'f'
    if short[i] then o = 'c' elseif tonumber(ARGV[first + i - 1]) > 0 then o = string.lower(out[i]) end
    counts[o] = counts[o] + 1
  end
  for _, h in ipairs({KEYS[nw + 3], KEYS[nw + 4]}) do
    local new = fresh and fresh[h]
    for letter, count in pairs(counts) do
      if count > 0 and redis.call('HINCRBY', h, hour .. letter, count) == count then new = true end
    end
    if taken > 0 and redis.call('HINCRBY', h, hour .. 'u', taken) == taken then new = true end
    if new then redis.call('PEXPIREAT', h, ARGV[9]) end
  end
end
`;

/**
 * The reply (see LIMIT_SCRIPT).
 */
const REPLY = `local result = {table.concat(out), banTtl, startedAt}
for w = 1, nw do result[#result + 1] = used[w] end
for w = 1, nw do result[#result + 1] = resetOf(w) end
for w = 1, nw do
  local text = ''
  if kind[w] == 's' and refused then
    local counts = {}
    local h = live[w]
    for i = 1, #h, 2 do
      local idx = tonumber(h[i])
      if idx >= from[w] then counts[idx] = tonumber(h[i + 1]) end
    end
    if taken > 0 then counts[cur[w]] = (counts[cur[w]] or 0) + taken end
    local order = {}
    for idx in pairs(counts) do order[#order + 1] = idx end
    table.sort(order)
    local parts = {}
    for _, idx in ipairs(order) do parts[#parts + 1] = string.format('%d:%d', idx, counts[idx]) end
    text = table.concat(parts, ',')
  end
  result[#result + 1] = text
end
if credits then
  result[#result + 1] = credits.before
  result[#result + 1] = credits.b
  result[#result + 1] = credits.refilled
  if credits.ex then
    result[#result + 1] = credits.ex[1]
    result[#result + 1] = credits.ex[2]
  else
    result[#result + 1] = -1
    result[#result + 1] = 0
  end
  result[#result + 1] = credits.m
end
result[#result + 1] = redisNow
return result
`;
/**
 * Decides n requests of one key at once, atomically and exactly as n single decisions in a row
 * would: every window of the policy, the refusal count and the ban in one script. A request is
 * admitted only while every window has room for its cost, and takes its cost from each; a refused
 * one takes nothing, so a cheaper request after it may still fit. Once the ban threshold is
 * crossed, that refusal and every request after it are banned. rate-limiter-flexible counts
 * every attempt per limiter and needs a command per window, so it cannot keep each window free
 * of the others' refusals in a single round trip.
 *
 * Windows: `f` fixed, a counter that lives its length from its first admission; `c` calendar, a
 * counter that expires at the period's end (the caller's clock names the period); `h` the day, as
 * `c` but kept as the field `d` of the key's usage-history hash of that day (its key names the
 * day, so a new day starts from nothing; one Redis key per active key less); `s` sliding, a
 * hash of bucket index to count, where a request sees every bucket the window overlaps, the
 * oldest whole (so no span of the window's length admits more than the limit).
 *
 * A refusal counts toward a ban while the Retry-After it is told runs (BanPolicy): the pending
 * hash holds, per PENDING_BUCKET_MS-long step, how many refusals count until that step (the
 * Retry-After, at least the shortest one, capped at the ban window, less the grace). It is read and
 * written only on a refusal, dropping the steps that have passed, and lives until its last step, so
 * a key that is not refused holds none. The refusal that makes more than the threshold count bans
 * the key and clears the hash. Each refusal counts for the wait of the windows that refused it, as
 * settleBatch tells it: not one that the request would have filled exactly.
 *
 * The batch is also counted in the key's usage history (usage-history.ts), in the same call:
 * per hour, admitted, limited, banned, out of credits, forbidden (cost 0: a scope or address the
 * key lacks) and the units admitted.
 *
 * KEYS: the policy's window keys (an `h` window's is the history's day hash), then ban, pending,
 * the history's day hash, and for a key of a customer the customer's day hash (written as the
 * key's: the customer's history is the sum of its keys'). A window of the customer is a key of
 * the customer's, which every key of it counts against: each call is atomic, so the customer's
 * windows stay exact whichever keys and replicas its requests come through.
 * ARGV: window count, now (epoch ms), ban threshold (-1: refusals count toward no ban), ban window
 * ms, ban ms, grace ms, shortest Retry-After ms, the history's hour of day ('' keeps no history:
 * then no `h` window), when its hash expires (epoch ms); then four per window: kind, limit, a, b
 * (f: length ms, 0; c and h: end epoch ms, 0; s: bucket ms, buckets per window); then one cost
 * per request.
 * Returns: outcomes (a letter per request: A admitted, L limited, B banned), ban ms left, 1 + the
 * index of the refusal that started a ban (or 0), then per window what it held before, then per
 * window ms until capacity starts to come back, then per window its live buckets after the batch
 * as "index:count,…" oldest first (sliding windows of a batch with a refusal; else "").
 *
 * Deadline (DEADLINE): the last ARGV, Redis's clock in ms past which the call does nothing and
 * returns {'late', Redis's time}; every other reply ends with Redis's time.
 *
 * Credits (CREDITS_READ): a request the windows admit but the balance cannot cover is answered C,
 * takes nothing and counts toward no ban; the reply then ends with the balance before the batch
 * (a refill due applied), after it, what the refill added, and when this call is the one that
 * found the balance unable to pay (credit-script.ts, `x`) the balance then and the cost refused (0:
 * a spend took it to 0), else -1 and 0; then the balance just after its last top-up (`m`, 0: none),
 * which `credits.low` measures a balance without a refill against. That mark costs the refusal branch nothing once set (`x` is
 * read in the HMGET every call makes) and one HSET on the first refusal after credits came back.
 *
 * Composed of its parts, in order, each reading the locals the parts before it set: the deadline,
 * the windows read, the credit balance read, the decision, the windows taken from, the ban, the history, the
 * credit balance spent, the reply. The text is the
 * same as one template would be (a test holds that this composition is the script Redis runs).
 */
export const LIMIT_SCRIPT = [
  DEADLINE,
  READ_WINDOWS,
  CREDITS_READ,
  BAN_LEFT,
  DECIDE,
  TAKE,
  BAN,
  HISTORY,
  CREDITS_WRITE,
  REPLY,
].join('');

/**
 * Reads without writing. KEYS: the policy's window keys, then ban, pending (both left out to read
 * a customer's windows alone: then the reply ends after the windows). ARGV: window count,
 * now, then per window: kind, a, b as for the limit script. Returns per window what it holds and
 * ms until capacity starts to come back (-1 when it holds nothing), then ban ms left, the refusals
 * that count toward a ban now.
 */
export const USAGE_SCRIPT = `${BAN_LEFT}
local nw = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local result = {}
for w = 1, nw do
  local p = 3 * w
  local kind, a, b = ARGV[p], tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2])
  local used, reset = 0, -1
  if kind == 's' then
    local from = math.floor(now / a) - b
    local h = redis.call('HGETALL', KEYS[w])
    local low = nil
    for i = 1, #h, 2 do
      local idx = tonumber(h[i])
      if idx >= from then
        used = used + tonumber(h[i + 1])
        if not low or idx < low then low = idx end
      end
    end
    if low then reset = (low + b + 1) * a - now end
  elseif kind == 'h' then
    used = tonumber(redis.call('HGET', KEYS[w], 'd') or '0')
    if used > 0 then reset = a - now end
  else
    used = tonumber(redis.call('GET', KEYS[w]) or '0')
    if used > 0 then reset = redis.call('PTTL', KEYS[w]) end
  end
  result[#result + 1] = used
  result[#result + 1] = reset
end
-- A customer's windows are read without a key: no ban, no refusals.
if not KEYS[nw + 1] then return result end
result[#result + 1] = banLeft(redis.call('GET', KEYS[nw + 1]), KEYS[nw + 1], now)
local pending = 0
local h = redis.call('HGETALL', KEYS[nw + 2])
for i = 1, #h, 2 do
  if tonumber(h[i]) * ${PENDING_BUCKET_MS} > now then pending = pending + tonumber(h[i + 1]) end
end
result[#result + 1] = pending
return result
`;
