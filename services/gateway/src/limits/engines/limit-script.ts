import { CREDIT_STATE } from '../../credits/credit-script.js';
import { PENDING_BUCKET_MS } from '../key-limiter.js';

/*
 * The limit script's parts. Each defines Lua functions and runs nothing: a function reads only its
 * arguments (and Redis), and hands back what it found, so a part can be run on its own (the parts'
 * tests evaluate one with a few lines that call it). MAIN, last, parses ARGV and wires them.
 */

/**
 * deadlinePassed(deadline) -> redisNow, late. `deadline`: Redis's clock in ms past which the call
 * does nothing (0: none). `redisNow`: Redis's time (ms), the reply's last element, for the
 * gateway's estimate of the clocks; `late`: whether the call reached Redis after its deadline (a
 * stall: Redis answers what it was sent meanwhile once it resumes), when the gateway has answered
 * its requests without it.
 */
const DEADLINE = `
local function deadlinePassed(deadline)
  local clock = redis.call('TIME')
  local redisNow = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  return redisNow, deadline > 0 and redisNow > deadline
end
`;

/**
 * readWindows(keys, args, nw, now) -> windows, banHeld. `keys`, `args`: the script's KEYS and ARGV
 * (window w's key at keys[w], the ban's at keys[nw + 1]; its kind, limit, a, b from args[6 + 4w]).
 * `windows`: n, keys and per window (arrays by w) kind, limit, a, b, used (what it holds before the
 * batch), and for sliding windows cur (the bucket now), from (the oldest bucket it sees), low (its
 * oldest live bucket, nil: none), live (its hash as read); ttl, the PTTLs read so far. A sliding
 * window's stale buckets are deleted here. `banHeld`: the ban key's value (false: none), read in
 * the same MGET as the counters.
 *
 * resetOf(windows, w, now) -> ms until window w starts to give capacity back (a fixed window's
 * PTTL read once, into windows.ttl).
 */
const READ_WINDOWS = `
local function readWindows(keys, args, nw, now)
  local kind, limit, a, b, used = {}, {}, {}, {}, {}
  local counters = {keys[nw + 1]}
  for w = 1, nw do
    local p = 6 + 4 * w
    kind[w] = args[p]
    limit[w] = tonumber(args[p + 1])
    a[w] = tonumber(args[p + 2])
    -- Parsed only where read (tonumber is glibc's strtod: some 700 instructions each).
    if kind[w] == 's' then b[w] = tonumber(args[p + 3]) end
    if kind[w] ~= 's' and kind[w] ~= 'h' then counters[#counters + 1] = keys[w] end
  end
  local v = redis.call('MGET', unpack(counters))
  local f = 1
  local cur, from, low, live = {}, {}, {}, {}
  for w = 1, nw do
    if kind[w] == 's' then
      cur[w] = math.floor(now / a[w])
      from[w] = cur[w] - b[w]
      local h = redis.call('HGETALL', keys[w])
      local sum, stale = 0, {}
      for i = 1, #h, 2 do
        local idx = tonumber(h[i])
        if idx < from[w] then
          stale[#stale + 1] = h[i]
        else
          sum = sum + tonumber(h[i + 1])
          if not low[w] or idx < low[w] then low[w] = idx end
        end
      end
      if #stale > 0 then redis.call('HDEL', keys[w], unpack(stale)) end
      used[w] = sum
      live[w] = h
    elseif kind[w] == 'h' then
      used[w] = tonumber(redis.call('HGET', keys[w], 'd') or '0')
    else
      f = f + 1
      used[w] = tonumber(v[f] or '0')
    end
  end
  return {n = nw, keys = keys, kind = kind, limit = limit, a = a, b = b, used = used,
    cur = cur, from = from, low = low, live = live, ttl = {}}, v[1]
end
local function resetOf(windows, w, now)
  local kind, a = windows.kind[w], windows.a[w]
  if kind == 'c' or kind == 'h' then return a - now end
  if kind == 's' then
    local oldest = windows.low[w]
    if not oldest then oldest = windows.cur[w] end
    return (oldest + windows.b[w] + 1) * a - now
  end
  if windows.used[w] == 0 then return a end
  local ttl = windows.ttl
  if not ttl[w] then ttl[w] = redis.call('PTTL', windows.keys[w]) end
  if ttl[w] < 0 then return a end
  return ttl[w]
end
`;

/**
 * banLeft(value, key, now) -> a ban's ms left at `now`, from the end its key holds (`value`):
 * every reader then names the same end. A key written as '1' (before bans kept their end), or an
 * end this replica's clock is already past while Redis still holds it, falls back to Redis's PTTL.
 */
const BAN_LEFT = `local function banLeft(value, key, now)
  local ends = tonumber(value)
  if ends and ends > now then return ends - now end
  return redis.call('PTTL', key)
end
`;

/**
 * decide(windows, costs, banState, credits, now) -> decision. Each request in turn (`costs`, one
 * number per request), admitted while every window has room for its cost (and the balance, when
 * `credits`); a refusal counts toward a ban while its Retry-After runs, and the one past the
 * threshold bans. `banState`: key, pending (the keys), held (the ban key's value), and the ban's
 * arguments as ARGV holds them, strings: threshold, window, ms, grace, shortest. `decision`: out
 * (a letter per request: A, L, B, C), taken (the units admitted), refused (whether a window
 * refused one), banTtl (ms left of a ban in force before the batch), startedAt (1 + the index of
 * the refusal that started a ban, or 0), pending (the refusals that count toward a ban, nil when
 * none was read), last (their latest step) and added (this batch's, by step; nil with pending).
 * Reads the pending hash, deleting its passed steps; the credit marks go into `credits`
 * (creditsShort).
 *
 * readPending(key, now) -> pending, last: the refusals that count toward a ban now, the steps
 * passed deleted, and the latest step.
 */
const DECIDE = `local function readPending(key, now)
  local pending, last = 0, 0
  local h = redis.call('HGETALL', key)
  local gone = {}
  for i = 1, #h, 2 do
    local ends = tonumber(h[i])
    if ends * ${PENDING_BUCKET_MS} > now then
      pending = pending + tonumber(h[i + 1])
      if ends > last then last = ends end
    else
      gone[#gone + 1] = h[i]
    end
  end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  return pending, last
end
local function decide(windows, costs, banState, credits, now)
  local nw, used, limit = windows.n, windows.used, windows.limit
  local out = {}
  local taken, banTtl, startedAt = 0, 0, 0
  local banned, refused = false, false
  if banState.held then
    banned = true
    banTtl = banLeft(banState.held, banState.key, now)
  end
  -- The refusals that count toward a ban: read on the batch's first one that counts.
  local pending, last, added = nil, 0, nil
  -- The ban's arguments, parsed on the batch's first refusal: an admitted batch needs none.
  local threshold, cap, grace, shortest = nil, nil, nil, nil
  for i = 1, #costs do
    local c = costs[i]
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
    elseif fits and not creditsCover(credits, taken, c) then
      -- Out of credits: refused, taking nothing, and counting toward no ban.
      out[i] = 'C'
      creditsShort(credits, taken, c)
    elseif fits then
      taken = taken + c
      out[i] = 'A'
    else
      refused = true
      out[i] = 'L'
      if not threshold then
        threshold, cap = tonumber(banState.threshold), tonumber(banState.window)
        grace, shortest = tonumber(banState.grace), tonumber(banState.shortest)
      end
      if threshold >= 0 then
        -- What this refusal is told to wait, at least (settleBatch tells it no less).
        local wait = shortest
        for w = 1, nw do
          if used[w] + taken + c > limit[w] then wait = math.max(wait, resetOf(windows, w, now)) end
        end
        local ends = math.floor((now + math.min(wait, cap) - grace) / ${PENDING_BUCKET_MS})
        if ends * ${PENDING_BUCKET_MS} > now then
          if not pending then
            pending, last = readPending(banState.pending, now)
            added = {}
          end
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
  return {out = out, taken = taken, refused = refused, banTtl = banTtl, startedAt = startedAt,
    pending = pending, last = last, added = added}
end
`;

/**
 * The credit balance, for a policy with credits (credit-script.ts). readCredits(hash, stream, now,
 * amount, period) -> credits: the balance read, a past hour's spend closed and a refill due
 * applied (`amount`, `period`: the refill's), with `before`, the balance before the batch.
 * creditsCover(credits, taken, c): whether the balance (none: nil) has room for a request of cost
 * c once the batch's admitted units (`taken`) are taken from it. creditsShort(credits, taken, c):
 * the mark of a request it cannot cover, in `credits`.
 */
const CREDITS_READ = `${CREDIT_STATE}
local function readCredits(hash, stream, now, amount, period)
  local credits = creditsRead(hash, stream, now, amount, period)
  credits.before = credits.b
  return credits
end
local function creditsCover(credits, taken, c)
  return credits == nil or c == 0 or credits.b - taken >= c
end
-- A request of cost c the balance cannot cover marks it exhausted (creditsExhaust): as a spend to 0
-- when this batch's admitted requests took it there (as one call per request would have), else as
-- this refusal.
local function creditsShort(credits, taken, c)
  local left = credits.b - taken
  if taken > 0 and left == 0 then c = 0 end
  creditsExhaust(credits, left, c)
end
`;

/**
 * creditsWrite(credits, taken, hash): the admitted units (`taken`) spent from the balance into the
 * open hour; a spend that leaves 0 marks it exhausted (creditsExhaust), in the same HSET. `credits`
 * is left as written, for the reply.
 */
const CREDITS_WRITE = `local function creditsWrite(credits, taken, hash)
  if taken > 0 then
    credits.b = credits.b - taken
    credits.u = credits.u + taken
    credits.dirty = true
    if credits.b == 0 then creditsExhaust(credits, 0, 0) end
  end
  if credits.dirty then creditsSave(hash, credits) end
end
`;

/**
 * take(windows, taken) -> fresh: the admitted units taken from each window, a new counter given
 * its expiry (windows.ttl and windows.low then as the windows stand after it). `fresh`: the
 * history hashes that got a new field here (a day window's `d`), whose expiry history sets; nil:
 * none.
 */
const TAKE = `local function take(windows, taken)
  local fresh = nil
  if taken == 0 then return fresh end
  local keys, kind, a, b, cur, low = windows.keys, windows.kind, windows.a, windows.b, windows.cur, windows.low
  for w = 1, windows.n do
    if kind[w] == 's' then
      redis.call('HINCRBY', keys[w], cur[w], taken)
      redis.call('PEXPIRE', keys[w], (b[w] + 1) * a[w])
      if not low[w] then low[w] = cur[w] end
    elseif kind[w] == 'h' then
      -- Its expiry is the history's, set there when the field is new.
      if redis.call('HINCRBY', keys[w], 'd', taken) == taken then
        fresh = fresh or {}
        fresh[keys[w]] = true
      end
    elseif redis.call('INCRBY', keys[w], taken) == taken then
      if kind[w] == 'f' then redis.call('PEXPIRE', keys[w], a[w]) else redis.call('PEXPIREAT', keys[w], a[w]) end
      windows.ttl[w] = a[w]
    end
  end
  return fresh
end
`;

/**
 * ban(decision, banState, now) -> banTtl: the ban started (its end written, the pending refusals
 * cleared), or this batch's refusals (decision.added) kept in the pending hash, which lives until
 * its last step. `banTtl`: the ban's ms left after the batch (0: none).
 */
const BAN = `local function ban(decision, banState, now)
  if decision.startedAt > 0 then
    local banTtl = tonumber(banState.ms)
    -- The ban's end itself, so every read of it names the same instant (a PTTL read drifts by ms).
    redis.call('SET', banState.key, string.format('%d', now + banTtl), 'PX', banState.ms)
    redis.call('DEL', banState.pending)
    return banTtl
  end
  if decision.pending then
    local last = decision.last
    for ends, count in pairs(decision.added) do
      redis.call('HINCRBY', banState.pending, string.format('%d', ends), count)
      if ends > last then last = ends end
    end
    -- Gone with its last step, whichever replica reads it next.
    redis.call('PEXPIRE', banState.pending, string.format('%d', last * ${PENDING_BUCKET_MS} - now))
  end
  return decision.banTtl
end
`;

/**
 * history(decision, costs, fresh, hour, expireAt, keyHash, customerHash): the batch's outcomes and
 * units in the key's hour (`hour`, the field's prefix, '' for no history) of its day hash
 * (`keyHash`), and for a key of a customer in the customer's (`customerHash`, nil: none; the same
 * hour, day and expiry). A request of cost 0 counts as forbidden (`f`), one out of credits as `c`.
 * `fresh`: the hashes take gave a new field. `expireAt`: when the hashes expire (epoch ms).
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
const HISTORY = `local function history(decision, costs, fresh, hour, expireAt, keyHash, customerHash)
  if hour == '' then return end
  local out, taken = decision.out, decision.taken
  local counts = {a = 0, l = 0, b = 0, c = 0, f = 0}
  for i = 1, #costs do
    local o = 'f'
    if costs[i] > 0 then o = string.lower(out[i]) end
    counts[o] = counts[o] + 1
  end
  local hashes = 1
  if customerHash then hashes = 2 end
  for k = 1, hashes do
    local h = keyHash
    if k == 2 then h = customerHash end
    local new = fresh and fresh[h]
    for letter, count in pairs(counts) do
      if count > 0 and redis.call('HINCRBY', h, hour .. letter, count) == count then new = true end
    end
    if taken > 0 and redis.call('HINCRBY', h, hour .. 'u', taken) == taken then new = true end
    if new then redis.call('PEXPIREAT', h, expireAt) end
  end
end
`;

/**
 * reply(windows, decision, banTtl, credits, now, redisNow) -> the script's reply (see LIMIT_SCRIPT).
 */
const REPLY = `local function reply(windows, decision, banTtl, credits, now, redisNow)
  local nw, taken = windows.n, decision.taken
  local result = {table.concat(decision.out), banTtl, decision.startedAt}
  for w = 1, nw do result[#result + 1] = windows.used[w] end
  for w = 1, nw do result[#result + 1] = resetOf(windows, w, now) end
  for w = 1, nw do
    local text = ''
    if windows.kind[w] == 's' and decision.refused then
      local counts = {}
      local h, from, cur = windows.live[w], windows.from[w], windows.cur[w]
      for i = 1, #h, 2 do
        local idx = tonumber(h[i])
        if idx >= from then counts[idx] = tonumber(h[i + 1]) end
      end
      if taken > 0 then counts[cur] = (counts[cur] or 0) + taken end
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
end
`;

/**
 * The script's body: ARGV parsed once into named values (the deadline and the credit terms taken
 * off its end), then the parts in order, each handed what it reads.
 */
const MAIN = `local deadline = tonumber(table.remove(ARGV))
local redisNow, late = deadlinePassed(deadline)
if late then return {'late', redisNow} end
local creditAmount, creditPeriod = nil, nil
if ARGV[#ARGV] == 'credits' then
  table.remove(ARGV)
  creditPeriod = table.remove(ARGV)
  creditAmount = tonumber(table.remove(ARGV))
end
local nw = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local costs = {}
for i = 10 + 4 * nw, #ARGV do costs[#costs + 1] = tonumber(ARGV[i]) end
local windows, banHeld = readWindows(KEYS, ARGV, nw, now)
local credits = nil
if creditPeriod then credits = readCredits(KEYS[#KEYS - 1], KEYS[#KEYS], now, creditAmount, creditPeriod) end
local banState = {key = KEYS[nw + 1], pending = KEYS[nw + 2], held = banHeld,
  threshold = ARGV[3], window = ARGV[4], ms = ARGV[5], grace = ARGV[6], shortest = ARGV[7]}
local decision = decide(windows, costs, banState, credits, now)
local fresh = take(windows, decision.taken)
local banTtl = ban(decision, banState, now)
-- The history's hashes follow pending, the credit keys (with credits) them: a customer's day hash
-- only when the count leaves two (a key of its own has one, and its balance's hash is no history).
local customerHash = nil
local historyHashes = #KEYS - nw - 2
if creditPeriod then historyHashes = historyHashes - 2 end
if historyHashes == 2 then customerHash = KEYS[nw + 4] end
history(decision, costs, fresh, ARGV[8], ARGV[9], KEYS[nw + 3], customerHash)
if credits then creditsWrite(credits, decision.taken, KEYS[#KEYS - 1]) end
return reply(windows, decision, banTtl, credits, now, redisNow)
`;
/**
 * The limit script's parts in order (LIMIT_SCRIPT is their text joined). Each but MAIN only defines
 * functions, so for its tests a part's text (after those whose functions it calls) plus a few lines
 * that call it is a script of its own.
 */
export const LIMIT_SCRIPT_PARTS = {
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
  MAIN,
} as const;

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
 * Credits (CREDITS_READ): with credits, the ARGV before the deadline are the refill amount, its
 * period and 'credits', and the last two KEYS the balance's hash and ledger stream
 * (credit-script.ts). A request the windows admit but the balance cannot cover is answered C,
 * takes nothing and counts toward no ban; the reply then ends with the balance before the batch
 * (a refill due applied), after it, what the refill added, and when this call is the one that
 * found the balance unable to pay (credit-script.ts, `x`) the balance then and the cost refused (0:
 * a spend took it to 0), else -1 and 0; then the balance just after its last top-up (`m`, 0: none),
 * which `credits.low` measures a balance without a refill against. That mark costs the refusal branch nothing once set (`x` is
 * read in the HMGET every call makes) and one HSET on the first refusal after credits came back.
 *
 * Composed of its parts, each a Lua function (or a few) with named inputs and outputs that reads
 * nothing another part set: the deadline, the windows read, the credit balance read, the ban's
 * time left, the decision, the windows taken from, the ban, the history, the credit balance spent,
 * the reply; then MAIN, which parses ARGV once and hands each part what it reads. A test holds that
 * this composition is the script Redis runs; limit-script-parts.test.ts runs each part on its own.
 */
export const LIMIT_SCRIPT = Object.values(LIMIT_SCRIPT_PARTS).join('');

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
