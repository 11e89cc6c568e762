// npm run bench:redis-instructions [-- --decisions 2000 --keys 100000 --cache-sim --skip-native --out DIR]
// Redis's work per limiter decision in instructions, which a busy host does not move: a
// redis-server of its own under `valgrind --tool=callgrind` (instrumentation off but for the
// measured phases, switched with callgrind_control), driven by the gateway's own engine
// (RedisKeyLimiter with its RedisUsageHistory, from dist: the real LIMIT_SCRIPT with the
// arguments the gateway sends), on the keys the bench's gateway serves (perMinute and perDay 1e9,
// never refused). Phases, each after a warm-up that leaves the key's counters and the script in
// place:
//   oneKey1       one key, one decision per script call (a caller awaiting each);
//   noHistory1    the same on a limiter that keeps no usage history (its day a counter of its
//                 own): what the history's part of the script costs;
//   oneKey32      one key, 32 callers at once: the engine batches them, as the gateway does;
//   customer1     a key of a customer (the key's windows and the customer's), one per call;
//   customer32    the same, 32 at once;
//   keys100k      100,000 keys, each decided once beforehand (not measured), then decisions of
//                 keys drawn at random among them, 32 callers at once (one call per decision).
// Prints instructions (Ir) per decision and per script call for each, Redis's commands per
// decision (INFO commandstats), and where the instructions go (callgrind_annotate, inclusive):
// the script call, the Lua VM, the commands the script runs (redis.call) by kind, dict lookups,
// reading and parsing requests, writing replies, malloc/free, the cron. Kernel time (the
// syscalls) is not counted by callgrind. `--cache-sim` adds callgrind's cache simulation (first
// level and last level misses per decision; about twice as slow). Then, unless `--skip-native`,
// the same phases on a redis-server run natively for INFO commandstats' usec_per_call per command
// (seconds: ±20 % on a shared host). The callgrind files stay in --out for callgrind_annotate or
// kcachegrind.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { DEFAULT_BILLING } from '@animal-store/gateway/customers/billing-period.js';
import { RedisKeyLimiter } from '@animal-store/gateway/limits/engines/redis-key-limiter.js';
import { customerPolicyFor, policyFor } from '@animal-store/gateway/limits/policy.js';
import { redisOptions } from '@animal-store/gateway/redis/clients.js';
import { RedisUsageHistory } from '@animal-store/gateway/usage/redis-usage-history.js';
import { Redis } from 'ioredis';
import { freePort, start, stopAll } from './processes.mjs';
import { commandCounters, countersDelta } from './redis-commands.mjs';
import { seededRandom } from './zipf.mjs';

const run = promisify(execFile);

const { values: args } = parseArgs({
  options: {
    decisions: { type: 'string', default: '2000' },
    keys: { type: 'string', default: '100000' },
    'cache-sim': { type: 'boolean', default: false },
    'skip-native': { type: 'boolean', default: false },
    // The report again from an earlier run's folder (its results.json and callgrind files).
    from: { type: 'string' },
    out: { type: 'string' },
  },
});

const DAY_MS = 86_400_000;
/** The bench's keys' limits (bench/traffic.mjs): never refused, so every decision admits. */
const LIMITS = { perMinute: 1e9, perDay: 1e9 };
const BAN = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
const PREFIX = 'gw:';

/**
 * Functions whose inclusive instructions are reported per decision, by what they are. Lua's own
 * functions are not exported by Debian's stripped redis-server, so the Lua VM is what the Lua
 * call costs less the commands it runs.
 */
const PARTS = [
  ['script call (EVALSHA, all of it)', ['evalShaCommand']],
  ['  Lua call (the script run)', ['luaCallFunction']],
  ['  commands run by the script (redis.call)', ['scriptCall']],
  ['    MGET', ['mgetCommand']],
  ['    HGET', ['hgetCommand']],
  ['    INCRBY', ['incrbyCommand']],
  ['    HINCRBY', ['hincrbyCommand']],
  ['    PEXPIREAT', ['pexpireatCommand']],
  ['    PEXPIRE', ['pexpireCommand']],
  ['    PTTL', ['pttlCommand']],
  ['    HGETALL', ['hgetallCommand']],
  ['    HMGET / HSET', ['hmgetCommand', 'hsetCommand']],
  ['dict lookups (dictFind, anywhere)', ['dictFind']],
  ['key lookups (lookupKey, anywhere)', ['lookupKey']],
  ['reading and parsing requests (readQueryFromClient)', ['readQueryFromClient']],
  ['  command dispatch (processCommand)', ['processCommand']],
  ['writing replies (writeToClient)', ['writeToClient']],
  ['event loop before sleep (beforeSleep)', ['beforeSleep']],
  ['cron (serverCron)', ['serverCron']],
  ['  active expiry (activeExpireCycle)', ['activeExpireCycle']],
  ['malloc / free (jemalloc)', ['malloc', 'free', 'calloc', 'realloc', 'sdallocx']],
];

function callgrindArgs(out) {
  return [
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${join(out, 'callgrind.out.%p')}`,
    ...(args['cache-sim'] ? ['--cache-sim=yes'] : []),
  ];
}

async function startServer(callgrindOut) {
  const port = await freePort();
  const server = ['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  // nice: a shared host's other work goes first; instructions do not depend on it.
  const argv = callgrindOut
    ? ['-n', '10', 'valgrind', ...callgrindArgs(callgrindOut), ...server]
    : ['-n', '10', ...server];
  const child = start(callgrindOut ? 'redis-server under callgrind' : 'redis-server', 'nice', argv);
  const url = `redis://127.0.0.1:${port}`;
  const admin = new Redis(url, { lazyConnect: true, retryStrategy: () => 200, maxRetriesPerRequest: null });
  admin.on('error', () => {});
  await admin.connect().catch(() => {});
  for (let i = 0; i < 600 && admin.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 100));
  if (admin.status !== 'ready') throw new Error(`redis-server did not accept connections on ${url}`);
  return { url, pid: child.pid, admin };
}

/** callgrind_control on the server (through vgdb): one of `--instr=on|off`, `--zero`, `--dump=hint`. */
async function control(pid, flag) {
  await run('callgrind_control', [flag, String(pid)], { timeout: 120_000 });
}

/** A limiter as the gateway builds one: its engine and usage history on a client of its own. */
async function gatewayLimiter(url) {
  // Long timeouts: under callgrind each call is tens of times slower than natively.
  const client = new Redis(url, { ...redisOptions(300_000), connectTimeout: 60_000 });
  client.on('error', () => {});
  await new Promise((resolve, reject) => {
    client.once('ready', resolve);
    client.once('end', () => reject(new Error('the limiter client could not connect')));
  });
  const history = new RedisUsageHistory(client, PREFIX, 35 * DAY_MS);
  return {
    client,
    limiter: new RedisKeyLimiter(client, PREFIX, BAN, Date.now, history),
    noHistory: new RedisKeyLimiter(client, PREFIX, BAN, Date.now, null),
  };
}

/** `workers` callers, each awaiting its decision before the next: `total` decisions in all. */
async function load(limiter, total, workers, pick) {
  let sent = 0;
  const worker = async () => {
    while (sent < total) {
      const { keyId, policy, customerId } = pick(sent++);
      const decision = await limiter.consume(keyId, policy, 1, customerId);
      if (decision.outcome !== 'admitted') throw new Error(`a bench decision was ${decision.outcome}`);
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
}

function phases(decisions, keyCount) {
  const lone = policyFor(LIMITS);
  const customer = customerPolicyFor(LIMITS, LIMITS, 'fixed', false, DEFAULT_BILLING);
  const oneKey = () => ({ keyId: 'key_bench_one', policy: lone });
  const customerKey = () => ({ keyId: 'key_bench_cust', policy: customer, customerId: 'cus_bench' });
  const many = (i) => ({ keyId: `key_bench_${i}`, policy: lone });
  const random = seededRandom(42);
  return [
    { name: 'oneKey1', what: 'one key, one decision per call', total: decisions, workers: 1, pick: oneKey },
    {
      name: 'noHistory1',
      what: 'one key, one per call, no usage history',
      total: decisions,
      workers: 1,
      pick: () => ({ keyId: 'key_bench_plain', policy: lone }),
      plain: true,
    },
    { name: 'oneKey32', what: 'one key, 32 at once (batched)', total: 4 * decisions, workers: 32, pick: oneKey },
    { name: 'customer1', what: 'a key of a customer, one per call', total: decisions, workers: 1, pick: customerKey },
    {
      name: 'customer32',
      what: 'a key of a customer, 32 at once',
      total: 4 * decisions,
      workers: 32,
      pick: customerKey,
    },
    {
      name: 'keys100k',
      what: `${keyCount.toLocaleString('en')} keys, random, 32 at once`,
      total: decisions,
      workers: 32,
      pick: () => many(Math.floor(random() * keyCount)),
      // Every key decided once first, in order: its counters, its history hash, the day's index.
      prepare: (limiter) => load(limiter, keyCount, 32, many),
    },
  ];
}

/** Instructions (and, with --cache-sim, misses) of a callgrind dump file, and its annotation. */
async function readDump(file) {
  const text = readFileSync(file, 'utf8');
  const events = /^events:\s+(.+)$/m.exec(text)?.[1].trim().split(/\s+/) ?? ['Ir'];
  const totals = (/^(?:totals|summary):\s+(.+)$/m.exec(text)?.[1] ?? '0').trim().split(/\s+/).map(Number);
  const byEvent = Object.fromEntries(events.map((e, i) => [e, totals[i] ?? 0]));
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', '--show=Ir', file], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const inclusive = new Map();
  for (const line of stdout.split('\n')) {
    // `12,345,678 (12.34%)  file.c:function [object]` (the percentage only in some versions).
    const m = /^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?\S*?:([\w.$@]+)(?:'\d+)?\s/.exec(line);
    if (!m) continue;
    const ir = Number(m[1].replaceAll(',', ''));
    // A function named twice (two objects, or recursion levels): its outermost, the largest.
    inclusive.set(m[2], Math.max(inclusive.get(m[2]) ?? 0, ir));
  }
  return { byEvent, inclusive };
}

async function measureCallgrind(out, decisions, keyCount) {
  const server = await startServer(out);
  const limiters = await gatewayLimiter(server.url);
  const results = [];
  for (const phase of phases(decisions, keyCount)) {
    const limiter = phase.plain ? limiters.noHistory : limiters.limiter;
    const started = performance.now();
    if (phase.prepare) await phase.prepare(limiter);
    // Warm-up: the script loaded, the key's counters and hash there, its day's index written.
    await load(limiter, 64, phase.workers, phase.pick);
    await new Promise((r) => setTimeout(r, 1200));
    const before = await commandCounters(server.admin);
    const dumped = new Set(readdirSync(out));
    await control(server.pid, '--instr=on');
    await control(server.pid, '--zero');
    await load(limiter, phase.total, phase.workers, phase.pick);
    await control(server.pid, `--dump=${phase.name}`);
    await control(server.pid, '--instr=off');
    let file;
    for (let i = 0; i < 600 && !file; i++) {
      file = readdirSync(out).find((f) => f.startsWith('callgrind.out.') && !dumped.has(f));
      if (!file) await new Promise((r) => setTimeout(r, 100));
    }
    if (!file) throw new Error(`callgrind wrote no dump for ${phase.name}`);
    // The dump may still be being written: wait for its totals line.
    for (let i = 0; i < 600 && !/^(?:totals|summary):/m.test(readFileSync(join(out, file), 'utf8')); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const commands = countersDelta(before, await commandCounters(server.admin));
    const dump = await readDump(join(out, file));
    results.push({ ...phase, file: join(out, file), commands, ...dump, seconds: (performance.now() - started) / 1000 });
    process.stderr.write(`  ${phase.name}: ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
  }
  limiters.client.disconnect();
  server.admin.disconnect();
  return results;
}

async function measureNative(decisions, keyCount) {
  const server = await startServer(null);
  const limiters = await gatewayLimiter(server.url);
  const results = [];
  for (const phase of phases(decisions, keyCount)) {
    const limiter = phase.plain ? limiters.noHistory : limiters.limiter;
    if (phase.prepare) await phase.prepare(limiter);
    await load(limiter, 64, phase.workers, phase.pick);
    const before = await commandCounters(server.admin);
    await load(limiter, phase.total, phase.workers, phase.pick);
    results.push({ ...phase, commands: countersDelta(before, await commandCounters(server.admin)) });
  }
  limiters.client.disconnect();
  server.admin.disconnect();
  return results;
}

const fmt = (n, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '–';

function report(results) {
  const lines = results.map((r) => `${r.name}: ${r.what}`);
  lines.push('');
  const names = results.map((r) => r.name);
  const row = (label, cells) => `| ${label} | ${cells.join(' | ')} |`;
  lines.push(
    row('per decision', names),
    row(
      '---',
      names.map(() => '---:'),
    ),
  );
  lines.push(
    row(
      'decisions',
      results.map((r) => fmt(r.total)),
    ),
  );
  const calls = (r) => r.commands.evalsha?.calls ?? 0;
  lines.push(
    row(
      'script calls per decision',
      results.map((r) => fmt(calls(r) / r.total, 3)),
    ),
  );
  lines.push(
    row(
      '**instructions (Ir)**',
      results.map((r) => `**${fmt(r.byEvent.Ir / r.total)}**`),
    ),
  );
  lines.push(
    row(
      'instructions per script call',
      results.map((r) => fmt(r.byEvent.Ir / calls(r))),
    ),
  );
  if (results[0].byEvent.D1mr !== undefined) {
    const sum = (r, events) => events.reduce((s, e) => s + (r.byEvent[e] ?? 0), 0);
    lines.push(
      row(
        'L1 misses (I1mr+D1mr+D1mw)',
        results.map((r) => fmt(sum(r, ['I1mr', 'D1mr', 'D1mw']) / r.total)),
      ),
    );
    lines.push(
      row(
        'LL misses (ILmr+DLmr+DLmw)',
        results.map((r) => fmt(sum(r, ['ILmr', 'DLmr', 'DLmw']) / r.total, 1)),
      ),
    );
  }
  for (const [label, fns] of PARTS) {
    const per = results.map((r) => fns.reduce((s, f) => s + (r.inclusive.get(f) ?? 0), 0) / r.total);
    if (per.every((v) => v === 0)) continue;
    lines.push(
      row(
        label,
        per.map((v) => fmt(v)),
      ),
    );
  }
  const lua = results.map(
    (r) => ((r.inclusive.get('luaCallFunction') ?? 0) - (r.inclusive.get('scriptCall') ?? 0)) / r.total,
  );
  lines.push(
    row(
      'Lua VM and its redis.call glue (Lua call less scriptCall)',
      lua.map((v) => fmt(v)),
    ),
  );
  const kinds = [...new Set(results.flatMap((r) => Object.keys(r.commands)))].sort();
  for (const kind of kinds) {
    lines.push(
      row(
        `${kind} calls`,
        results.map((r) => fmt((r.commands[kind]?.calls ?? 0) / r.total, 3)),
      ),
    );
  }
  return lines.join('\n');
}

function nativeReport(results) {
  const lines = ['INFO commandstats on a native redis-server: calls and usec per decision (usec_per_call)'];
  for (const r of results) {
    const parts = Object.entries(r.commands)
      .sort((a, b) => b[1].usec - a[1].usec)
      .map(([k, s]) => `${k} ${fmt(s.calls / r.total, 2)}×${fmt(s.usec / s.calls, 2)}`);
    const script = r.commands.evalsha;
    lines.push(`  ${r.name}: evalsha usec per decision ${fmt((script?.usec ?? 0) / r.total, 2)}; ${parts.join(', ')}`);
  }
  return lines.join('\n');
}

/** The report of an earlier run, from its results.json and callgrind files. */
async function reportFrom(dir) {
  const saved = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'));
  const results = [];
  for (const r of saved) {
    const file = join(dir, r.file.split('/').pop());
    results.push({ ...r, total: r.decisions, file, ...(await readDump(file)) });
  }
  process.stdout.write(`${report(results)}\n`);
}

async function main() {
  if (args.from) return reportFrom(resolve(args.from));
  const out = resolve(args.out ?? mkdtempSync(join(tmpdir(), 'bench-redis-instructions-')));
  mkdirSync(out, { recursive: true });
  const decisions = Number(args.decisions);
  const keyCount = Number(args.keys);
  const load0 = loadavg()[0];
  process.stderr.write(`callgrind phases (load average ${load0.toFixed(1)}):\n`);
  const results = await measureCallgrind(out, decisions, keyCount);
  await stopAll();
  process.stdout.write(`${report(results)}\n`);
  const summary = results.map((r) => ({
    name: r.name,
    what: r.what,
    decisions: r.total,
    events: r.byEvent,
    commands: r.commands,
    inclusive: Object.fromEntries(PARTS.flatMap(([, fns]) => fns).map((f) => [f, r.inclusive.get(f) ?? 0])),
    file: r.file,
  }));
  writeFileSync(join(out, 'results.json'), `${JSON.stringify(summary, null, 2)}\n`);
  if (!args['skip-native']) process.stdout.write(`${nativeReport(await measureNative(decisions, keyCount))}\n`);
  await stopAll();
  process.stdout.write(
    `load average ${load0.toFixed(1)} at the start, ${loadavg()[0].toFixed(1)} at the end (instructions do not depend on it)\ncallgrind files: ${out}\n`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench:redis-instructions failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
