// npm run bench [-- --out FILE] [--plot FILE.svg] [--rounds N] [--duration SECONDS] [--redis cluster|sentinel]
// npm run bench -- --only traffic [--traffic-keys N] [--traffic-customers N] [--zipf S] [--seed N]
//                  [--post-share F] [--rates R1,R2] [--credit-customers N]   (only the sections below)
// npm run bench -- --only regions [--traffic-keys N] [--rates R1,R2]   (NATS_URL set against unset)
// npm run bench -- --from FILE.json --plot FILE.svg     (draws a saved run, runs nothing)
// npm run bench -- --against REF [--quick]   (also the gateway of commit REF, in the same rounds;
//                                             --quick: only GET/POST and CPU per request)
// Compares, in one run on loopback, the subjects of bench/subjects.mjs (pets alone, a bare proxy,
// the gateway at its default log level, at warn and logging to a file, and the afternoon peer
// stack), in interleaved rounds (bench/rounds.mjs); prints a table per request and the ratios.
// Then the gateway over 1, 1k and 100k active keys (bench/many-keys.mjs) with what a key costs in
// memory, the gateway over one and 100k customers of 3 keys each (bench/many-customers.mjs) with
// what a customer costs in Redis, and latency at fixed rates (bench/fixed-rate.mjs). Then traffic like
// production (bench/traffic.mjs: Zipf-popular keys, GET and POST, HAProxy among the subjects) and the
// cost of credits (bench/credits-cost.mjs). With --redis cluster|sentinel, also
// the gateway on that local topology, as a ratio to standalone.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { buildAgainst } from './against.mjs';
import { creditsCost } from './credits-cost.mjs';
import { fixedRate } from './fixed-rate.mjs';
import {
  CUSTOMER_COUNTS,
  customersSubject,
  KEYS_PER_CUSTOMER,
  primeCustomers,
  sampleCustomerBytes,
  writeManyCustomers,
} from './many-customers.mjs';
import { KEY_COUNTS, keyCacheBytes, keysSubject, primeKeys, rotating, writeManyKeys } from './many-keys.mjs';
import { plot } from './plot.mjs';
import {
  atExit,
  cpuMicros,
  freePort,
  redisIdleMicrosPerSecond,
  redisPerRequest,
  start,
  startRedis,
  stopAll,
} from './processes.mjs';
import { commandsPerRequest } from './redis-commands.mjs';
import { startTopology } from './redis-topology.mjs';
import { regionsCost } from './regions-cost.mjs';
import { printCredits, printExtras, printRatios, printRegions, printTable, printTraffic } from './report.mjs';
import { cannon, interleave, ratioByRound } from './rounds.mjs';
import { SUBJECTS, startSubjects } from './subjects.mjs';
import { productionTraffic } from './traffic.mjs';

const { values: args } = parseArgs({
  options: {
    out: { type: 'string' },
    duration: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '5' },
    redis: { type: 'string', default: 'standalone' },
    plot: { type: 'string' },
    from: { type: 'string' },
    against: { type: 'string' },
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    'traffic-keys': { type: 'string', default: '100000' },
    'traffic-customers': { type: 'string', default: '10000' },
    zipf: { type: 'string', default: '1.1' },
    seed: { type: 'string', default: '42' },
    'post-share': { type: 'string', default: '0.1' },
    rates: { type: 'string', default: '1000,2000' },
    'credit-customers': { type: 'string', default: '1000' },
  },
});
if (args.only !== undefined && !['traffic', 'regions'].includes(args.only)) {
  throw new Error('--only takes one value: traffic or regions');
}
const load = {
  connections: Number(args.connections),
  warmup: Number(args.warmup),
  rounds: Number(args.rounds),
  duration: Number(args.duration),
};
/** The host's 1, 5 and 15 minute load averages: every figure of a shared host needs its load beside it. */
const loadAverage = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
const trafficOpts = {
  keys: Number(args['traffic-keys']),
  customers: Number(args['traffic-customers']),
  s: Number(args.zipf),
  seed: Number(args.seed),
  postShare: Number(args['post-share']),
  rates: args.rates.split(',').map(Number),
  creditCustomers: Number(args['credit-customers']),
  load,
};
const progress = (what) => (round) => process.stderr.write(`bench: ${what} round ${round + 1}/${load.rounds}\n`);

const getPets = (target, headers = target.headers) => ({ url: `${target.url}/v1/pets?limit=20`, headers });
const postPet = (target) => ({
  url: `${target.url}/v1/pets`,
  method: 'POST',
  body: JSON.stringify({ name: 'bench', categoryId: 1 }),
  headers: { ...target.headers, 'content-type': 'application/json' },
});

/** The machine a run was made on, for the JSON and the plot: runs elsewhere are not comparable. */
function machine() {
  const cpu = cpus();
  let redisVersion = 'unknown';
  try {
    redisVersion =
      /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? redisVersion;
  } catch {}
  return `${cpu.length} × ${cpu[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}, Redis ${redisVersion}`;
}

const auth = (key) => ({ authorization: `Bearer ${key}` });

/**
 * Refusals on the gateway as users run it (a key over its limit, a banned key); a plan with
 * sliding windows beside the spec's fixed ones, interleaved with the bare proxy and the gateway
 * again; Redis commands per request of each.
 */
async function refusalsAndSliding({ subjects, keys, admin, results, startSlidingGateway }) {
  const s = results.scenarios;
  const { gateway } = subjects;
  await fetch(getPets(gateway).url, { headers: auth(keys.limited) });
  const refused = await interleave(
    [
      { name: 'over the limit', request: getPets(gateway, auth(keys.limited)), status: 429 },
      { name: 'banned key', request: getPets(gateway, auth(keys.banned)), status: 429 },
    ],
    load,
    progress('refusals'),
  );
  printTable('gateway refusals (429)', refused);
  s['get.gateway429'] = refused['over the limit'];
  s['get.gatewayBanned'] = refused['banned key'];
  // Not run in the same rounds as the admitted GET: a ratio of medians.
  const share = (a) => Number((a.requestsPerSecond / s['get.gateway'].requestsPerSecond).toFixed(3));
  results.refusals = { '429/admitted': share(s['get.gateway429']), 'banned/admitted': share(s['get.gatewayBanned']) };

  const gatewaySliding = await startSlidingGateway();
  const slidingRun = await interleave(
    [
      { name: 'bareProxy', request: getPets(subjects.bareProxy), status: 200 },
      { name: 'gateway', request: getPets(gateway), status: 200 },
      { name: 'gatewaySliding', request: getPets(gatewaySliding), status: 200 },
    ],
    load,
    progress('GET, sliding windows'),
  );
  printTable('GET /v1/pets?limit=20, a plan with sliding windows', slidingRun);
  s['get.gatewaySliding'] = slidingRun.gatewaySliding;
  results.ratios['get.gatewaySliding/bareProxy'] = ratioByRound(slidingRun.gatewaySliding, slidingRun.bareProxy);
  results.ratios['get.gatewaySliding/gateway'] = ratioByRound(slidingRun.gatewaySliding, slidingRun.gateway);

  results.redis = {
    'gateway admitted': await commandsPerRequest(admin, getPets(gateway)),
    'gateway admitted, sliding windows': await commandsPerRequest(admin, getPets(gatewaySliding)),
    'gateway admitted, key of a customer': await commandsPerRequest(admin, getPets(subjects.gatewayCustomer)),
    'gateway banned': await commandsPerRequest(admin, getPets(gateway, auth(keys.banned))),
    'peer admitted': await commandsPerRequest(admin, getPets(subjects.peer)),
  };
  return { gatewaySliding };
}

/**
 * Latency at fixed rates, a quarter, half and three quarters of what the bare proxy saturates at:
 * the load a deployment runs at, where saturation runs measure only the ceiling.
 */
async function latencyAtFixedRates({ subjects, results }) {
  const saturation = results.scenarios['get.bareProxy'].requestsPerSecond;
  results.latency = { saturation, levels: {}, p50AddedMs: {}, p99AddedMs: {} };
  for (const share of [0.25, 0.5, 0.75]) {
    const level = `${share * 100}%`;
    const rate = Math.round(saturation * share);
    const at = {};
    for (const name of ['bareProxy', 'gateway', 'peer']) {
      const target = getPets(subjects[name]);
      await fixedRate({ ...target, rate, seconds: 1, connections: load.connections });
      at[name] = await fixedRate({ ...target, rate, seconds: load.duration, connections: load.connections });
      if (at[name].answered < at[name].requests * 0.99)
        throw new Error(`${name} at ${rate}/s: ${JSON.stringify(at[name])}`);
    }
    results.latency.levels[level] = { rate, ...at };
    const added = (p) => Number((at.gateway[p] - at.bareProxy[p]).toFixed(3));
    results.latency.p50AddedMs[level] = added('p50Ms');
    results.latency.p99AddedMs[level] = added('p99Ms');
    process.stderr.write(`bench: latency at ${level} (${rate}/s) done\n`);
  }
}

/** Many keys: one more gateway (default settings) whose keys file holds 1 + 1k + 100k keys. */
async function manyKeys({ subjects, admin, redis, dir, results, startGateway, against }) {
  const many = writeManyKeys(dir);
  const manyGateway = await startGateway({ REDIS_URL: redis.url, API_KEYS_FILE: many.file }, undefined);
  const top = KEY_COUNTS.at(-1);
  // The gateway's default (KEY_CACHE_MAX), unless this shell sets it: the child inherits the shell.
  const keyCacheMax = Number(process.env.KEY_CACHE_MAX ?? 50_000);
  results.memory = {
    ...(await primeKeys({ admin, gateway: manyGateway, sets: many.sets, connections: load.connections })),
    keyCacheMax,
    gatewayBytesPerCachedKey: keyCacheBytes(keyCacheMax),
  };
  // With --against, that commit's gateway over the largest set too, its keys sent once first.
  let againstMany = null;
  if (against) {
    againstMany = await startGateway(
      { REDIS_URL: redis.url, API_KEYS_FILE: many.file },
      undefined,
      undefined,
      against.server,
    );
    await cannon({ ...rotating(againstMany.url, many.sets[top]), connections: load.connections, amount: top });
  }
  const keyRun = await interleave(
    [
      { name: 'bareProxy', request: getPets(subjects.bareProxy), status: 200 },
      { name: 'peer', request: getPets(subjects.peer), status: 200 },
      ...KEY_COUNTS.map((n) => ({
        name: keysSubject(n),
        request: rotating(manyGateway.url, many.sets[n]),
        status: 200,
      })),
      ...(againstMany
        ? [{ name: `${keysSubject(top)}Against`, request: rotating(againstMany.url, many.sets[top]), status: 200 }]
        : []),
    ],
    load,
    progress('GET over 1, 1k and 100k keys'),
  );
  printTable('GET /v1/pets, keys in turn', keyRun);
  results.manyKeys = {
    counts: KEY_COUNTS,
    subjects: KEY_COUNTS.map(keysSubject),
    requestsPerSecond: Object.fromEntries(Object.entries(keyRun).map(([name, r]) => [name, r.requestsPerSecond])),
    scenarios: keyRun,
  };
  for (const n of KEY_COUNTS.slice(1))
    results.ratios[`get.${keysSubject(n)}/gateway`] = ratioByRound(keyRun[keysSubject(n)], keyRun.gateway);
  if (againstMany) {
    const name = keysSubject(top);
    results.ratios[`get.${name}/${name}Against`] = ratioByRound(keyRun[name], keyRun[`${name}Against`]);
    const request = (target) => rotating(target.url, many.sets[top]);
    results.againstCpu100kKeys = await pairedCpu(manyGateway, againstMany, 500, request);
  }
  return { manyGateway, many };
}

/**
 * Many customers: one more gateway (default settings) whose keys file holds one customer and
 * 100k customers, 3 keys each; each set primed key by key, then interleaved with the bare proxy and
 * the lone-key gateway, every request taking its set's next key.
 */
async function manyCustomers({ subjects, admin, redis, dir, results, startGateway, prefix }) {
  const many = writeManyCustomers(dir);
  const gateway = await startGateway({ REDIS_URL: redis.url, API_KEYS_FILE: many.file }, undefined);
  const primed = await primeCustomers({ admin, gateway, sets: many.sets, connections: load.connections });
  const top = CUSTOMER_COUNTS.at(-1);
  const sampled = await sampleCustomerBytes({
    admin,
    gateway,
    prefix,
    ids: many.customerIds[top],
    authorizations: many.sets[top],
  });
  const customerRun = await interleave(
    [
      { name: 'bareProxy', request: getPets(subjects.bareProxy), status: 200 },
      { name: 'gateway', request: getPets(subjects.gateway), status: 200 },
      ...CUSTOMER_COUNTS.map((n) => ({
        name: customersSubject(n),
        request: rotating(gateway.url, many.sets[n]),
        status: 200,
      })),
    ],
    load,
    progress(`GET over 1 and ${top / 1000}k customers of ${KEYS_PER_CUSTOMER} keys`),
  );
  printTable(`GET /v1/pets, keys of customers in turn`, customerRun);
  const name = customersSubject(top);
  results.manyCustomers = {
    counts: CUSTOMER_COUNTS,
    keysPerCustomer: KEYS_PER_CUSTOMER,
    subjects: CUSTOMER_COUNTS.map(customersSubject),
    ...primed,
    ...sampled,
    redis: await commandsPerRequest(admin, rotating(gateway.url, many.sets[top]), 20_000),
    scenarios: customerRun,
  };
  results.ratios[`get.${name}/${customersSubject(1)}`] = ratioByRound(
    customerRun[name],
    customerRun[customersSubject(1)],
  );
  results.ratios[`get.${customersSubject(1)}/gateway`] = ratioByRound(
    customerRun[customersSubject(1)],
    customerRun.gateway,
  );
  return { manyCustomersGateway: gateway, manyCustomerSets: many.sets };
}

/**
 * CPU per request of two subjects loaded at once, each at `rate`, in `load.rounds` rounds: both
 * see the same machine in the same seconds, so their ratio holds where each one's own figure
 * swings with the host. `ratio` is the median of the rounds' a/b. With `redisPid`, that process's
 * CPU counts as a's (a is then the only one of the two using it).
 */
async function pairedCpu(a, b, rate, request = getPets, redisPid = undefined) {
  const fixed = (target) => ({ ...request(target), connections: load.connections / 2, overallRate: rate });
  const cpuOfA = () => cpuMicros(a.process.pid) + (redisPid ? cpuMicros(redisPid) : 0);
  const rounds = [];
  await Promise.all([a, b].map((t) => cannon({ ...fixed(t), duration: 1 })));
  for (let round = 0; round < load.rounds; round++) {
    // Redis's own background, when its CPU counts as a's: taken off (processes.mjs).
    const idle = redisPid ? await redisIdleMicrosPerSecond(redisPid) : 0;
    const before = [cpuOfA(), cpuMicros(b.process.pid)];
    const started = performance.now();
    const [na, nb] = await Promise.all(
      [a, b].map(async (t) => (await cannon({ ...fixed(t), duration: load.duration })).requests.total),
    );
    const perA = redisPerRequest(cpuOfA() - before[0], idle, performance.now() - started, na);
    const perB = (cpuMicros(b.process.pid) - before[1]) / nb;
    rounds.push({ a: Number(perA.toFixed(1)), b: Number(perB.toFixed(1)) });
  }
  const median = (xs) => {
    const sorted = [...xs].sort((x, y) => x - y);
    const mid = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  };
  return { rate, ratio: Number(median(rounds.map((r) => r.a / r.b)).toFixed(3)), rounds };
}

async function main() {
  if (args.from) {
    if (!args.plot) throw new Error('--from draws a saved run: give --plot FILE.svg too');
    writeFileSync(args.plot, plot(JSON.parse(readFileSync(args.from, 'utf8'))));
    process.stdout.write(`wrote ${args.plot}\n`);
    return;
  }
  const redis = await startRedis();
  const admin = new Redis(redis.url);
  const dir = mkdtempSync(join(tmpdir(), 'bench-'));
  // Also when the run fails or is stopped: the folder holds the --against worktree, which git
  // would otherwise keep listing.
  atExit(() => {
    rmSync(dir, { recursive: true, force: true });
    execFileSync('git', ['worktree', 'prune'], { stdio: 'ignore' });
  });
  const against = args.against ? buildAgainst(args.against, dir) : undefined;
  const names = against ? [...SUBJECTS, 'gatewayAgainst'] : SUBJECTS;
  const { subjects, keys, prefix, startGateway, startSlidingGateway } = await startSubjects({ redis, dir, against });
  await admin.set(`${prefix}{${keys.bannedId}}:ban`, '1', 'PX', 3_600_000);

  process.stdout.write(
    `\nbench: ${load.connections} connections, keep-alive, no pipelining; ${load.warmup} s warm-up per subject, ` +
      `then ${load.rounds} interleaved rounds × ${load.duration} s (order rotated each round); medians of rounds\n`,
  );
  const results = {
    scenarios: {},
    ratios: {},
    config: {
      ...load,
      redis: args.redis,
      subjects: names,
      ...(against && { against: { ref: against.ref, commit: against.commit, packages: against.packages } }),
      quick: args.quick,
      stdout: 'pipe drained by the bench (gatewayToFile: a file in the temporary folder)',
    },
    machine: machine(),
    loadAverageAtStart: loadAverage(),
  };
  const s = results.scenarios;
  const trafficRun = { subjects, startGateway, redis, admin, dir, opts: trafficOpts, loadAverage };
  if (args.only === 'traffic') {
    await trafficSections(trafficRun, results);
    await finish(results, admin);
    return;
  }
  if (args.only === 'regions') {
    results.regions = await regionsCost(trafficRun);
    printRegions(results.regions);
    await finish(results, admin);
    return;
  }
  for (const [method, title, request, status] of [
    ['get', 'GET /v1/pets?limit=20', getPets, 200],
    ['post', 'POST /v1/pets', postPet, 201],
  ]) {
    const measured = await interleave(
      names.map((name) => ({ name, request: request(subjects[name]), status })),
      load,
      progress(title),
    );
    printTable(title, measured);
    for (const [name, r] of Object.entries(measured)) s[`${method}.${name}`] = r;
  }

  // --quick stops here: the before/after of a change needs only the tables above and the CPU below.
  const run = { subjects, keys, prefix, admin, redis, dir, results, startGateway, startSlidingGateway, against };
  let extras = null;
  if (!args.quick) {
    const { gatewaySliding } = await refusalsAndSliding(run);
    await latencyAtFixedRates(run);
    extras = { gatewaySliding, ...(await manyKeys(run)), ...(await manyCustomers(run)) };
    await trafficSections(trafficRun, results);
  }

  // CPU and log bytes per request at a fixed, moderate rate: steadier than throughput on a shared
  // machine, and it shows where the time goes (the process itself, and Redis on its behalf).
  const cpuRate = Math.min(2000, Math.round(s['get.direct'].requestsPerSecond / 4));
  const costPer = async (target, usesRedis, request = getPets(target)) => {
    const fixed = { ...request, connections: load.connections, overallRate: cpuRate };
    await cannon({ ...fixed, duration: 1 });
    const child = target.process;
    const idle = usesRedis && redis.pid ? await redisIdleMicrosPerSecond(redis.pid) : 0;
    const before = [cpuMicros(child.pid), cpuMicros(redis.pid), child.stdoutBytes];
    const started = performance.now();
    const n = (await cannon({ ...fixed, duration: load.duration })).requests.total;
    const ms = performance.now() - started;
    if (!n)
      throw new Error(`no answer from ${target.url} (pid ${child.pid}, exit ${child.exitCode ?? child.signalCode})`);
    const perRequest = (after, b) => Number(((after - b) / n).toFixed(1));
    return {
      process: perRequest(cpuMicros(child.pid), before[0]),
      redis:
        usesRedis && redis.pid
          ? Number(redisPerRequest(cpuMicros(redis.pid) - before[1], idle, ms, n).toFixed(1))
          : null,
      redisRaw: usesRedis && redis.pid ? perRequest(cpuMicros(redis.pid), before[1]) : null,
      redisIdleUsPerSecond: usesRedis && redis.pid ? Math.round(idle) : null,
      stdoutBytes: perRequest(child.stdoutBytes, before[2]),
    };
  };
  results.perRequest = { rate: cpuRate, subjects: {} };
  for (const name of names) {
    results.perRequest.subjects[name] = await costPer(subjects[name], !['direct', 'bareProxy'].includes(name));
  }
  // The gateway and its Redis against the bare proxy, loaded together: what the gateway costs on
  // top of a proxy, in the figure this host swings least in (req/s ratios move ±20 % run to run).
  results.bareProxyCpu = await pairedCpu(subjects.gateway, subjects.bareProxy, cpuRate / 2, getPets, redis.pid);
  if (against) results.againstCpu = await pairedCpu(subjects.gateway, subjects.gatewayAgainst, cpuRate / 2);
  // A key of a customer against a lone key, the same way: the customer layer's own cost.
  results.customerCpu = await pairedCpu(subjects.gatewayCustomer, subjects.gateway, cpuRate / 2);
  if (extras) {
    const { gatewaySliding, manyGateway, many, manyCustomersGateway, manyCustomerSets } = extras;
    results.perRequest.subjects.gatewaySliding = await costPer(gatewaySliding, true);
    results.perRequest.subjects.gateway100kKeys = await costPer(
      manyGateway,
      true,
      rotating(manyGateway.url, many.sets[KEY_COUNTS.at(-1)]),
    );
    for (const n of CUSTOMER_COUNTS) {
      results.perRequest.subjects[customersSubject(n)] = await costPer(
        manyCustomersGateway,
        true,
        rotating(manyCustomersGateway.url, manyCustomerSets[n]),
      );
    }
  }

  for (const method of ['get', 'post']) {
    const x = (name) => s[`${method}.${name}`];
    results.ratios[`${method}.gateway/bareProxy`] = ratioByRound(x('gateway'), x('bareProxy'));
    results.ratios[`${method}.gateway/peer`] = ratioByRound(x('gateway'), x('peer'));
    results.ratios[`${method}.gatewayQuiet/bareProxy`] = ratioByRound(x('gatewayQuiet'), x('bareProxy'));
    results.ratios[`${method}.gatewayToFile/bareProxy`] = ratioByRound(x('gatewayToFile'), x('bareProxy'));
    results.ratios[`${method}.gatewayToFile/gateway`] = ratioByRound(x('gatewayToFile'), x('gateway'));
    results.ratios[`${method}.gatewayCustomer/gateway`] = ratioByRound(x('gatewayCustomer'), x('gateway'));
    results.ratios[`${method}.bareProxy/direct`] = ratioByRound(x('bareProxy'), x('direct'));
    if (against) {
      results.ratios[`${method}.gateway/gatewayAgainst`] = ratioByRound(x('gateway'), x('gatewayAgainst'));
      results.ratios[`${method}.gatewayAgainst/bareProxy`] = ratioByRound(x('gatewayAgainst'), x('bareProxy'));
    }
  }

  // The same admitted GET through a gateway (default log level) on a local Sentinel or Cluster,
  // interleaved with a fresh standalone one: two new processes, so neither the first gateway's long
  // run nor the machine's drifting load tilts the ratio.
  if (args.redis !== 'standalone' && !args.quick) {
    const topologyEnv = await startTopology(args.redis, { start, freePort, dir });
    const standalone = await startGateway({ REDIS_URL: redis.url }, undefined);
    const onTopology = await startGateway(topologyEnv, undefined);
    const measured = await interleave(
      [
        { name: 'standalone', request: getPets(standalone), status: 200 },
        { name: args.redis, request: getPets(onTopology), status: 200 },
      ],
      load,
      progress(`gateway on ${args.redis}`),
    );
    printTable(`gateway on ${args.redis}`, measured);
    s['get.gateway.standaloneAgain'] = measured.standalone;
    s[`get.gateway.${args.redis}`] = measured[args.redis];
    results.ratios[`get.gateway.${args.redis}/standalone`] = ratioByRound(measured[args.redis], measured.standalone);
  }

  printRatios(results.ratios);
  printExtras(results);
  await finish(results, admin);
}

/** Traffic like production, then the cost of credits; each printed as it ends. */
async function trafficSections(run, results) {
  results.traffic = await productionTraffic(run);
  printTraffic(results.traffic);
  results.credits = await creditsCost(run);
  printCredits(results.credits);
}

/** The JSON and the plot, then every process down. */
async function finish(results, admin) {
  results.loadAverageAtEnd = loadAverage();
  if (args.out) {
    writeFileSync(args.out, `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(`wrote ${args.out}\n`);
  }
  if (args.plot) {
    writeFileSync(args.plot, plot(results));
    process.stdout.write(`wrote ${args.plot}\n`);
  }
  admin.disconnect();
  await stopAll();
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
