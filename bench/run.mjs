// npm run bench [-- --out FILE] [--rounds N] [--duration SECONDS] [--redis cluster|sentinel]
// Compares, in one run on loopback, the five subjects of bench/subjects.mjs (pets alone, a bare
// proxy, the gateway at its default log level and at warn, and the afternoon peer stack), in
// interleaved rounds (bench/rounds.mjs); prints a table per request and the ratios. With --redis
// cluster|sentinel, also the gateway on that local topology, as a ratio to standalone.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { cpuMicros, freePort, start, startRedis, stopAll } from './processes.mjs';
import { commandsPerRequest } from './redis-commands.mjs';
import { startTopology } from './redis-topology.mjs';
import { printExtras, printRatios, printTable } from './report.mjs';
import { cannon, interleave, ratioByRound } from './rounds.mjs';
import { SUBJECTS, startSubjects } from './subjects.mjs';

const { values: args } = parseArgs({
  options: {
    out: { type: 'string' },
    duration: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '5' },
    redis: { type: 'string', default: 'standalone' },
  },
});
const load = {
  connections: Number(args.connections),
  warmup: Number(args.warmup),
  rounds: Number(args.rounds),
  duration: Number(args.duration),
};
const progress = (what) => (round) => process.stderr.write(`bench: ${what} round ${round + 1}/${load.rounds}\n`);

const getPets = (target, headers = target.headers) => ({ url: `${target.url}/v1/pets?limit=20`, headers });
const postPet = (target) => ({
  url: `${target.url}/v1/pets`,
  method: 'POST',
  body: JSON.stringify({ name: 'bench', categoryId: 1 }),
  headers: { ...target.headers, 'content-type': 'application/json' },
});

async function main() {
  const redis = await startRedis();
  const admin = new Redis(redis.url);
  const dir = mkdtempSync(join(tmpdir(), 'bench-'));
  const { subjects, keys, prefix, startGateway, startSlidingGateway } = await startSubjects({ redis, dir });
  await admin.set(`${prefix}{${keys.bannedId}}:ban`, '1', 'PX', 3_600_000);

  process.stdout.write(
    `\nbench: ${load.connections} connections, keep-alive, no pipelining; ${load.warmup} s warm-up per subject, ` +
      `then ${load.rounds} interleaved rounds × ${load.duration} s (order rotated each round); medians of rounds\n`,
  );
  const results = {
    scenarios: {},
    ratios: {},
    config: { ...load, redis: args.redis, subjects: SUBJECTS, stdout: 'pipe drained by the bench' },
  };
  const s = results.scenarios;
  for (const [method, title, request, status] of [
    ['get', 'GET /v1/pets?limit=20', getPets, 200],
    ['post', 'POST /v1/pets', postPet, 201],
  ]) {
    const measured = await interleave(
      SUBJECTS.map((name) => ({ name, request: request(subjects[name]), status })),
      load,
      progress(title),
    );
    printTable(title, measured);
    for (const [name, r] of Object.entries(measured)) s[`${method}.${name}`] = r;
  }

  // Refusals on the gateway as users run it: a key over its limit, and a banned key.
  const { gateway } = subjects;
  const auth = (key) => ({ authorization: `Bearer ${key}` });
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

  // A plan with sliding windows beside the spec's fixed ones, interleaved with the bare proxy and
  // the gateway again: its ratio to each, its Redis commands and its CPU per request below.
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
    'gateway banned': await commandsPerRequest(admin, getPets(gateway, auth(keys.banned))),
    'peer admitted': await commandsPerRequest(admin, getPets(subjects.peer)),
  };

  // Latency the gateway adds at half of its own maximum throughput.
  const half = Math.round(s['get.gateway'].requestsPerSecond / 2);
  const atHalf = async (target) => {
    const r = await cannon({
      ...getPets(target),
      connections: load.connections,
      duration: load.duration,
      overallRate: half,
    });
    return { p50Ms: r.latency.p50, p99Ms: r.latency.p99 };
  };
  const directHalf = await atHalf(subjects.direct);
  const gatewayHalf = await atHalf(gateway);
  results.addedLatencyAtHalfLoad = {
    rate: half,
    direct: directHalf,
    gateway: gatewayHalf,
    addedP50Ms: gatewayHalf.p50Ms - directHalf.p50Ms,
    addedP99Ms: gatewayHalf.p99Ms - directHalf.p99Ms,
  };

  // CPU and log bytes per request at a fixed, moderate rate: steadier than throughput on a shared
  // machine, and it shows where the time goes (the process itself, and Redis on its behalf).
  const cpuRate = Math.min(2000, Math.round(s['get.direct'].requestsPerSecond / 4));
  const costPer = async (target, usesRedis) => {
    const fixed = { ...getPets(target), connections: load.connections, overallRate: cpuRate };
    await cannon({ ...fixed, duration: 1 });
    const child = target.process;
    const before = [cpuMicros(child.pid), cpuMicros(redis.pid), child.stdoutBytes];
    const n = (await cannon({ ...fixed, duration: load.duration })).requests.total;
    if (!n)
      throw new Error(`no answer from ${target.url} (pid ${child.pid}, exit ${child.exitCode ?? child.signalCode})`);
    const perRequest = (after, b) => Number(((after - b) / n).toFixed(1));
    return {
      process: perRequest(cpuMicros(child.pid), before[0]),
      redis: usesRedis && redis.pid ? perRequest(cpuMicros(redis.pid), before[1]) : null,
      stdoutBytes: perRequest(child.stdoutBytes, before[2]),
    };
  };
  results.perRequest = { rate: cpuRate, subjects: {} };
  for (const name of SUBJECTS) {
    results.perRequest.subjects[name] = await costPer(subjects[name], !['direct', 'bareProxy'].includes(name));
  }
  results.perRequest.subjects.gatewaySliding = await costPer(gatewaySliding, true);

  for (const method of ['get', 'post']) {
    const x = (name) => s[`${method}.${name}`];
    results.ratios[`${method}.gateway/bareProxy`] = ratioByRound(x('gateway'), x('bareProxy'));
    results.ratios[`${method}.gateway/peer`] = ratioByRound(x('gateway'), x('peer'));
    results.ratios[`${method}.gatewayQuiet/bareProxy`] = ratioByRound(x('gatewayQuiet'), x('bareProxy'));
    results.ratios[`${method}.bareProxy/direct`] = ratioByRound(x('bareProxy'), x('direct'));
  }

  // The same admitted GET through a gateway (default log level) on a local Sentinel or Cluster,
  // interleaved with a fresh standalone one: two new processes, so neither the first gateway's long
  // run nor the machine's drifting load tilts the ratio.
  if (args.redis !== 'standalone') {
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
  if (args.out) {
    writeFileSync(args.out, `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(`wrote ${args.out}\n`);
  }
  admin.disconnect();
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
