// Traffic like production for `npm run bench`: many keys with a Zipf-like popularity (bench/zipf.mjs:
// a few hot, a long tail), GETs and POSTs mixed, sent to every subject in the same seeded order, at
// saturation and at fixed moderate rates (open loop, bench/fixed-rate.mjs), in rounds whose order
// rotates. Per subject and load: req/s, p50/p99, CPU µs per request of the process and of Redis, and
// Redis commands and round trips per request, from Redis's own counters.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { fixedRate } from './fixed-rate.mjs';
import { haproxyBinary, startHaproxy } from './haproxy.mjs';
import { customersWithKeys, KEYS_PER_CUSTOMER } from './many-customers.mjs';
import { cpuMicros, freePort, redisIdleMicrosPerSecond, redisPerRequest, start, waitFor } from './processes.mjs';
import { clientCommands } from './redis-commands.mjs';
import { cannon } from './rounds.mjs';
import { trafficPlan } from './zipf.mjs';

const LIMITS = { perMinute: 1e9, perDay: 1e9 };
const POST_BODY = JSON.stringify({ name: 'bench', categoryId: 1 });

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};
const round1 = (x) => (x === null ? null : Number(x.toFixed(1)));

/**
 * A subject's requests in the plan's order: `authorizationOf(rank, i)` names request i's key from
 * its popularity rank. The cursor carries on from run to run, so a subject walks the sequence
 * rather than replaying its hot start. Both autocannon options and, for the open loop, `next()`.
 */
export function zipfRequests(url, plan, authorizationOf) {
  let i = 0;
  const length = plan.ranks.length;
  const make = () => {
    const at = i++ % length;
    const authorization = authorizationOf(plan.ranks[at], i);
    return plan.posts[at]
      ? {
          method: 'POST',
          path: '/v1/pets',
          headers: { authorization, 'content-type': 'application/json' },
          body: POST_BODY,
        }
      : { method: 'GET', path: '/v1/pets?limit=20', headers: { authorization } };
  };
  return {
    url,
    next: make,
    autocannon: () => ({
      url,
      requests: [
        {
          setupRequest: (req) => {
            const r = make();
            return { ...req, method: r.method, path: r.path, headers: r.headers, body: r.body };
          },
        },
      ],
    }),
  };
}

/** One INFO for both sections: its own command and read are one each, taken off the deltas. */
async function redisCounters(admin) {
  const text = await admin.call('INFO', 'stats', 'commandstats');
  const stats = {};
  for (const m of text.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) stats[m[1]] = Number(m[2]);
  return { commands: stats, reads: Number(/^total_reads_processed:(\d+)/m.exec(text)?.[1] ?? Number.NaN) };
}

/**
 * Runs `run` (it resolves to the requests answered) and returns what they cost: CPU µs per request
 * of the subject's process and of Redis, and the Redis commands (sent by clients; a script's own
 * calls are not counted) and reads (round trips: one read of Redis's per batch a client writes).
 */
async function measured(subject, ctx, run) {
  const { admin, redisPid } = ctx;
  const pid = subject.process.pid;
  const before = { process: cpuMicros(pid), redis: redisPid ? cpuMicros(redisPid) : Number.NaN };
  const counters = await redisCounters(admin);
  const started = performance.now();
  const out = await run();
  const ms = performance.now() - started;
  const after = await redisCounters(admin);
  const n = out.n;
  const byCommand = {};
  for (const [k, v] of Object.entries(after.commands)) {
    const d = v - (counters.commands[k] ?? 0);
    if (d > 0 && k !== 'info') byCommand[k] = d;
  }
  return {
    ...out,
    cpuProcess: (cpuMicros(pid) - before.process) / n,
    cpuRedis: subject.usesRedis ? redisPerRequest(cpuMicros(redisPid) - before.redis, ctx.redisIdle ?? 0, ms, n) : null,
    cpuRedisRaw: subject.usesRedis ? (cpuMicros(redisPid) - before.redis) / n : null,
    commands: clientCommands(byCommand),
    calls: Object.values(byCommand).reduce((sum, v) => sum + v, 0),
    reads: after.reads - counters.reads - 1,
    byCommand,
  };
}

/** The rounds of one load for `subjects`, their order rotated by one each round. */
export async function roundsOf(subjects, load, ctx, what) {
  const runs = Object.fromEntries(subjects.map((s) => [s.name, []]));
  const runOne = (s) =>
    load.rate
      ? async () => {
          const r = await fixedRate({
            url: s.requests.url,
            rate: load.rate,
            seconds: ctx.duration,
            connections: ctx.connections,
            next: s.requests.next,
            serverTiming: s.timings,
          });
          return { n: r.answered || 1, p50Ms: r.p50Ms, p99Ms: r.p99Ms, answeredShare: r.answered / r.requests };
        }
      : async () => {
          const r = await cannon({ ...s.requests.autocannon(), connections: ctx.connections, duration: ctx.duration });
          if (r.non2xx + r.errors > r.requests.total * 0.01) {
            throw new Error(
              `${s.name}: ${JSON.stringify(r.statusCodeStats)} errors=${r.errors} of ${r.requests.total}`,
            );
          }
          return {
            n: r.requests.total || 1,
            rps: Math.round(r.requests.average),
            p50Ms: r.latency.p50,
            p99Ms: r.latency.p99,
            non2xx: r.non2xx + r.errors,
          };
        };
  const idle = [];
  for (let round = 0; round < ctx.rounds; round++) {
    // Redis's own background this round, taken off each subject's Redis CPU (processes.mjs).
    if (ctx.redisPid) {
      ctx.redisIdle = await redisIdleMicrosPerSecond(ctx.redisPid);
      idle.push(ctx.redisIdle);
    }
    for (let i = 0; i < subjects.length; i++) {
      const s = subjects[(i + round) % subjects.length];
      runs[s.name].push(await measured(s, ctx, runOne(s)));
    }
    process.stderr.write(`bench: ${what} round ${round + 1}/${ctx.rounds} (load average ${ctx.loadAverage()})\n`);
  }
  if (idle.length > 0)
    ctx.redisIdleUsPerSecond = { ...ctx.redisIdleUsPerSecond, [what]: idle.map((x) => Math.round(x)) };
  return Object.fromEntries(Object.entries(runs).map(([name, rs]) => [name, summary(rs)]));
}

/** Medians of the rounds for times; the Redis counts as totals over all of them per request. */
function summary(rs) {
  const n = rs.reduce((sum, r) => sum + r.n, 0);
  const byCommand = {};
  for (const r of rs) for (const [k, v] of Object.entries(r.byCommand)) byCommand[k] = (byCommand[k] ?? 0) + v;
  const pick = (field) => median(rs.map((r) => r[field]));
  return {
    ...(rs[0].rps !== undefined && { requestsPerSecond: Math.round(pick('rps')) }),
    ...(rs[0].answeredShare !== undefined && {
      answeredShare: Number(Math.min(...rs.map((r) => r.answeredShare)).toFixed(3)),
    }),
    p50Ms: Number(pick('p50Ms').toFixed(2)),
    p99Ms: Number(pick('p99Ms').toFixed(2)),
    cpuProcessUs: round1(pick('cpuProcess')),
    cpuRedisUs: round1(pick('cpuRedis')),
    cpuRedisRawUs: round1(pick('cpuRedisRaw')),
    redisCommandsPerRequest: Number((rs.reduce((s, r) => s + r.commands, 0) / n).toFixed(3)),
    redisCallsPerRequest: Number((rs.reduce((s, r) => s + r.calls, 0) / n).toFixed(3)),
    redisRoundTripsPerRequest: Number((rs.reduce((s, r) => s + r.reads, 0) / n).toFixed(3)),
    byCommandPerRequest: Object.fromEntries(Object.entries(byCommand).map(([k, v]) => [k, Number((v / n).toFixed(3))])),
    requests: n,
    rounds: rs.map((r) => ({
      ...(r.rps !== undefined && { rps: r.rps }),
      p50Ms: Number(r.p50Ms.toFixed(2)),
      p99Ms: Number(r.p99Ms.toFixed(2)),
      cpu: `${round1(r.cpuProcess)}+${round1(r.cpuRedis) ?? 0}`,
    })),
  };
}

/** Server-Timing values (`gate;dur=0.081, …`) summed up: p50 and p99 of each stage, in ms. */
function stageSummary(values) {
  const per = {};
  for (const value of values) {
    for (const entry of value.split(', ')) {
      const [name, dur] = entry.split(';dur=');
      per[name] ??= [];
      per[name].push(Number(dur));
    }
  }
  return Object.fromEntries(
    Object.entries(per).map(([name, xs]) => {
      xs.sort((a, b) => a - b);
      const at = (p) => Number(xs[Math.min(xs.length - 1, Math.ceil(p * xs.length) - 1)].toFixed(3));
      return [name, { count: xs.length, p50Ms: at(0.5), p99Ms: at(0.99) }];
    }),
  );
}

/** The traffic's keys (a keys file for the gateways, a key map for the peer) and its customers. */
export function writeTrafficKeys(dir, keyCount, customerCount) {
  const authorizations = [];
  const entries = [];
  for (let i = 0; i < keyCount; i++) {
    const { key, record } = createKey({ plan: 'enterprise', name: `traffic ${i}`, limits: LIMITS });
    entries.push(toKeyFileEntry(record));
    authorizations.push(`Bearer ${key}`);
  }
  const file = join(dir, 'keys-traffic.json');
  writeFileSync(file, JSON.stringify(entries));
  const peerFile = join(dir, 'peer-keys-traffic.json');
  writeFileSync(peerFile, JSON.stringify(authorizations.map((a) => [a.slice(7), 1e9])));
  const customers = customersWithKeys(customerCount, 'traffic');
  const customersFile = join(dir, 'keys-traffic-customers.json');
  writeFileSync(customersFile, JSON.stringify(customers.file));
  return { file, peerFile, authorizations, customersFile, customerAuthorizations: customers.authorizations };
}

async function startPeer({ petsUrl, redisUrl, peerFile, authorization }) {
  const port = await freePort();
  const child = start('peer', process.execPath, ['bench/peer.mjs'], {
    PORT: String(port),
    PETS_URL: petsUrl,
    REDIS_URL: redisUrl,
    PEER_KEYS_FILE: peerFile,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/v1/pets`, { headers: { authorization } });
  return { url, process: child };
}

/**
 * Starts the traffic's subjects (bare proxy reused, HAProxy where installed, the peer, the gateway,
 * the gateway with SERVER_TIMING=1, the gateway over customers), then measures them at saturation
 * and at each of `rates`. Returns the results for the JSON.
 */
export async function productionTraffic({ subjects, startGateway, redis, admin, dir, opts, loadAverage }) {
  const { keys: keyCount, customers: customerCount, s, seed, postShare, rates } = opts;
  const written = writeTrafficKeys(dir, keyCount, customerCount);
  const plan = trafficPlan({ n: keyCount, s, seed, postShare });
  const customerPlan = trafficPlan({ n: customerCount, s, seed, postShare });
  const byRank = (rank) => written.authorizations[rank];
  // A customer's keys in turn: the first, second and third of customer `rank`.
  const byCustomer = (rank, i) => written.customerAuthorizations[rank + (i % KEYS_PER_CUSTOMER) * customerCount];
  const petsUrl = subjects.direct.url;
  const env = { REDIS_URL: redis.url, API_KEYS_FILE: written.file };
  const started = {
    bareProxy: subjects.bareProxy,
    peer: await startPeer({ petsUrl, redisUrl: redis.url, peerFile: written.peerFile, authorization: byRank(0) }),
    gateway: await startGateway(env, undefined),
    gatewayServerTiming: await startGateway({ ...env, SERVER_TIMING: '1' }, undefined),
    gatewayCustomers: await startGateway({ REDIS_URL: redis.url, API_KEYS_FILE: written.customersFile }, undefined),
  };
  const binary = haproxyBinary();
  if (binary) {
    started.haproxy = await startHaproxy({
      binary,
      dir,
      upstream: petsUrl,
      tableSize: keyCount * 2,
      authorization: byRank(0),
    });
  } else {
    process.stdout.write('bench: haproxy is not installed: the HAProxy subject is skipped\n');
  }
  const order = ['bareProxy', 'haproxy', 'peer', 'gateway', 'gatewayServerTiming', 'gatewayCustomers'];
  const list = order
    .filter((name) => started[name])
    .map((name) => ({
      name,
      process: started[name].process,
      usesRedis: ['peer', 'gateway', 'gatewayServerTiming', 'gatewayCustomers'].includes(name),
      requests: zipfRequests(
        started[name].url,
        name === 'gatewayCustomers' ? customerPlan : plan,
        name === 'gatewayCustomers' ? byCustomer : byRank,
      ),
      timings: name === 'gatewayServerTiming' ? [] : undefined,
    }));
  const ctx = { ...opts.load, admin, redisPid: redis.pid, loadAverage };
  for (const subject of list)
    await cannon({ ...subject.requests.autocannon(), connections: ctx.connections, duration: ctx.warmup });
  const result = {
    plan: { keys: keyCount, s, seed, postShare, distinctIn1M: plan.distinct, shareOfTop: plan.topShare },
    customers: { count: customerCount, keysPerCustomer: KEYS_PER_CUSTOMER, shareOfTop: customerPlan.topShare },
    haproxy: binary ? binary : 'not installed',
    loadAverage: { start: loadAverage() },
    saturation: await roundsOf(list, {}, ctx, 'Zipf traffic at saturation'),
    fixed: {},
    stages: {},
  };
  const timing = list.find((x) => x.timings);
  for (const rate of rates) {
    timing.timings.length = 0;
    result.fixed[rate] = await roundsOf(list, { rate }, ctx, `Zipf traffic at ${rate} req/s`);
    result.stages[rate] = stageSummary(timing.timings);
  }
  result.loadAverage.end = loadAverage();
  result.redisIdleUsPerSecond = ctx.redisIdleUsPerSecond;
  return result;
}
