// npm run bench:regions [-- --delays 50,150] [--limit 1000] [--fill-seconds 10] [--out FILE]
//                        [--scenarios steady,oneRegion,burstAtStart,partition]
// BENCH_REGIONS_TRACE=1: each poll of the regions' views to stderr, the gateways' logs to the
// run's temporary folder.
//
// Three regions on this machine, each a gateway (defaults, REGION_SYNC_MS 250) on its own
// redis-server and its own nats-server, the three servers joined as a supercluster by NATS
// gateways, every gateway link through a proxy that holds each chunk `delay` ms each way
// (bench/region-links.mjs). Per delay and scenario, on a fresh key whose day allows `limit`:
// admitted ÷ limit beside the bound docs/regions.md states, and after a partition the time until
// every region has its counts again and its shares end. Writes JSON (bench-results-regions.json).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { freePort, start, startRedis, stopAll, waitFor } from './processes.mjs';
import { startDelayProxy, superclusterConfig } from './region-links.mjs';
import { startPets } from './subjects.mjs';

const { values: args } = parseArgs({
  options: {
    delays: { type: 'string', default: '50,150' },
    limit: { type: 'string', default: '1000' },
    'fill-seconds': { type: 'string', default: '10' },
    out: { type: 'string', default: 'bench-results-regions.json' },
    scenarios: { type: 'string' },
  },
});
const DELAYS = args.delays.split(',').map(Number);
const LIMIT = Number(args.limit);
/** F in the bound: how long the steady traffic takes to fill the window. */
const FILL_S = Number(args['fill-seconds']);
const REGIONS = ['eu', 'us', 'ap'];
/** The gateway's default (docs/regions.md): the bench measures what users run. */
const SYNC_MS = 250;
const ADMIN_TOKEN = 'bench-regions-admin-token';
const dir = mkdtempSync(join(tmpdir(), 'bench-regions-'));
// Every region has its own redis-server here, whatever this shell's REDIS_URL says.
delete process.env.REDIS_URL;

/** Fresh keys, one per scenario and delay: their minute and their day allow the limit (a minute's turn cannot lift the day's). */
function writeKeys(n) {
  const made = Array.from({ length: n }, (_, i) =>
    createKey({ plan: 'enterprise', name: `regions ${i}`, limits: { perMinute: LIMIT, perDay: LIMIT } }),
  );
  const file = join(dir, 'keys.json');
  writeFileSync(file, JSON.stringify(made.map((k) => toKeyFileEntry(k.record))));
  return { file, keys: made.map((k) => k.key) };
}

/** Three regions' NATS, each behind a delay proxy that every other region dials. */
async function startNats(delayMs) {
  const ports = {};
  const proxies = {};
  for (const region of REGIONS) {
    const [client, http, route, gateway] = [await freePort(), await freePort(), await freePort(), await freePort()];
    proxies[region] = await startDelayProxy({ target: { host: '127.0.0.1', port: gateway }, delayMs });
    ports[region] = { client, http, route, gateway, proxy: proxies[region].port };
  }
  const servers = {};
  for (const region of REGIONS) {
    const conf = join(dir, `nats-${region}-${delayMs}.conf`);
    writeFileSync(conf, superclusterConfig(region, ports, mkdtempSync(join(dir, `js-${region}-`))));
    servers[region] = start(`nats-${region}`, 'nats-server', ['-c', conf]);
  }
  for (const region of REGIONS) await waitFor(`http://127.0.0.1:${ports[region].http}/healthz`);
  return { ports, proxies, servers };
}

/** A region's gateway as users run it, on its Redis and its NATS. */
async function startGateway(region, { redisUrl, natsUrl, petsUrl, keysFile }) {
  const [port, adminPort, portalPort] = [await freePort(), await freePort(), await freePort()];
  const child = start(
    `gateway-${region}`,
    process.execPath,
    ['services/gateway/dist/server.js'],
    {
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      PORTAL_PORT: String(portalPort),
      HOST: '127.0.0.1',
      PETS_URL: petsUrl,
      REDIS_URL: redisUrl,
      API_KEYS_FILE: keysFile,
      ADMIN_TOKEN,
      NATS_URL: natsUrl,
      REGION: region,
      LOG_LEVEL: undefined,
      // Refusals are what is counted here; a ban would turn them into another answer.
      BAN_THRESHOLD: '1000000',
    },
    { stdoutFile: process.env.BENCH_REGIONS_TRACE ? join(dir, `gateway-${region}.log`) : undefined },
  );
  await waitFor(`http://127.0.0.1:${port}/readyz`);
  const admin = `http://127.0.0.1:${adminPort}`;
  return { region, url: `http://127.0.0.1:${port}`, admin, process: child };
}

/** GET /admin/regions of one gateway (null while its NATS is out of reach). */
async function regionsView(gateway) {
  const res = await fetch(`${gateway.admin}/admin/regions`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return res.ok ? res.json() : null;
}

/** Until every gateway hears the other two and enforces no share: ms waited. */
async function untilConverged(gateways, timeoutMs = 60_000) {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    const views = await Promise.all(gateways.map(regionsView));
    const settled = views.every(
      (v) => v && !v.partitioned && v.sharesInForce === 0 && v.regions.filter((r) => !r.partitioned).length === 2,
    );
    if (settled) return Math.round(performance.now() - started);
    if (process.env.BENCH_REGIONS_TRACE)
      process.stderr.write(`${Date.now()} ${Math.round(performance.now() - started)} ${JSON.stringify(views)}\n`);
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`the regions did not converge within ${timeoutMs} ms`);
}

/**
 * `rate` requests a second of `key` to `gateway` for `seconds`, open loop (each sent at its time,
 * whatever the answers before it): { sent, admitted }. Anything but 200 or 429 stops the run.
 */
async function paced(gateway, key, rate, seconds) {
  const n = Math.round(rate * seconds);
  const t0 = performance.now();
  const answers = [];
  for (let i = 0; i < n; i++) {
    const wait = t0 + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    answers.push(send(gateway, key));
  }
  const statuses = await Promise.all(answers);
  return { sent: n, admitted: statuses.filter((s) => s === 200).length };
}

async function send(gateway, key) {
  const res = await fetch(`${gateway.url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  if (res.status !== 200 && res.status !== 429) throw new Error(`${gateway.region}: ${res.status}`);
  return res.status;
}

/**
 * `n` requests at once from each gateway, `concurrency` in flight each: { sent, admitted,
 * seconds, sentAt } (each request's start, ms on one clock for all regions).
 */
async function burst(gateways, key, n, concurrency = 32) {
  const t0 = performance.now();
  const sentAt = [];
  const perRegion = await Promise.all(
    gateways.map(async (gateway) => {
      let next = 0;
      let admitted = 0;
      const worker = async () => {
        while (next++ < n) {
          sentAt.push(performance.now());
          if ((await send(gateway, key)) === 200) admitted++;
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      return admitted;
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { sent: n * gateways.length, admitted: perRegion.reduce((a, b) => a + b, 0), seconds, sentAt };
}

/** The most requests sent within any `spanMs`: what the regions can admit before hearing of it. */
function mostWithin(sentAt, spanMs) {
  const times = [...sentAt].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < times.length; j++) {
    while (times[j] - times[i] > spanMs) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

/**
 * The bound docs/regions.md states, as admitted ÷ limit: 1 + (R − 1)/R × U / L, U being what all
 * regions admitted within s + d + `extraMs` (a partition's REGION_STALE_MS), capped at R (a region
 * alone admits at most the limit). At a steady rate r, U = r × (s + d + extra).
 */
function bound(unknown) {
  const over = ((REGIONS.length - 1) / REGIONS.length) * unknown;
  return Number((1 + Math.min(over, (REGIONS.length - 1) * LIMIT) / LIMIT).toFixed(3));
}
const steadyBound = (rate, pathMs, extraMs = 0) => bound((rate * (SYNC_MS + pathMs + extraMs)) / 1000);

const ratio = (admitted) => Number((admitted / LIMIT).toFixed(3));
const rate = LIMIT / FILL_S;

/**
 * A count's path, ms: one link (a gateway's core subscription hears the others' publishes straight
 * from their servers), at the p99 the proxies held chunks since the last call. The figure asked
 * for is the floor: a late timer on this busy process only adds.
 */
function pathMs(world) {
  const held = Object.values(world.nats.proxies).map((p) => p.takeHeld());
  const p99 = Math.max(world.delayMs, ...held.map((h) => h.p99Ms));
  return { pathMs: Number(p99.toFixed(1)) };
}

async function steady(world, key) {
  pathMs(world);
  const runs = await Promise.all(world.gateways.map((g) => paced(g, key, rate / REGIONS.length, 1.5 * FILL_S)));
  const admitted = runs.reduce((a, r) => a + r.admitted, 0);
  const path = pathMs(world);
  return {
    admitted,
    admittedPerLimit: ratio(admitted),
    bound: steadyBound(rate, path.pathMs),
    ...path,
    perRegion: runs,
  };
}

async function oneRegion(world, key) {
  const run = await paced(world.gateways[0], key, rate, 1.5 * FILL_S);
  return { admitted: run.admitted, admittedPerLimit: ratio(run.admitted), bound: 1, sent: run.sent };
}

async function burstAtStart(world, key) {
  pathMs(world);
  const { sentAt, ...run } = await burst(world.gateways, key, Math.ceil(LIMIT / 2));
  const path = pathMs(world);
  const unknown = mostWithin(sentAt, SYNC_MS + path.pathMs);
  return {
    ...run,
    sentWithinSyncAndPath: unknown,
    admittedPerLimit: ratio(run.admitted),
    bound: bound(unknown),
    ...path,
  };
}

/** Steady traffic for 2F; `ap` is cut from the others from 0.3F to 1.2F. */
async function partition(world, key) {
  const [eu, us, ap] = REGIONS;
  pathMs(world);
  const traffic = Promise.all(world.gateways.map((g) => paced(g, key, rate / REGIONS.length, 2 * FILL_S)));
  const at = (s) => new Promise((r) => setTimeout(r, s * 1000));
  await at(0.3 * FILL_S);
  for (const r of [eu, us]) world.nats.proxies[r].cut(ap);
  for (const r of [eu, us]) world.nats.proxies[ap].cut(r);
  await at(0.9 * FILL_S);
  const during = await Promise.all(world.gateways.map(regionsView));
  for (const r of [eu, us]) world.nats.proxies[r].heal(ap);
  for (const r of [eu, us]) world.nats.proxies[ap].heal(r);
  const convergedMs = await untilConverged(world.gateways);
  const runs = await traffic;
  const admitted = runs.reduce((a, r) => a + r.admitted, 0);
  const path = pathMs(world);
  return {
    admitted,
    admittedPerLimit: ratio(admitted),
    bound: steadyBound(rate, path.pathMs, 3 * SYNC_MS),
    ...path,
    convergedAfterHealMs: convergedMs,
    partitioned: during.map((v, i) => ({ region: REGIONS[i], partitioned: v?.partitioned ?? 'NATS unreachable' })),
    perRegion: runs,
  };
}

const SCENARIOS = { steady, oneRegion, burstAtStart, partition };

/** Which region's server holds the stream (its JetStream placement: the first gateway to ask). */
async function streamHome(nats) {
  for (const region of REGIONS) {
    const url = `http://127.0.0.1:${nats.ports[region].http}/jsz?accounts=true&streams=true`;
    if (/"name":\s*"GATEWAY_REGIONS"/.test(await (await fetch(url)).text())) return region;
  }
  return null;
}

async function world(delayMs, pets, keysFile) {
  const nats = await startNats(delayMs);
  const gateways = [];
  for (const region of REGIONS) {
    const redis = await startRedis();
    const natsUrl = `nats://127.0.0.1:${nats.ports[region].client}`;
    gateways.push(await startGateway(region, { redisUrl: redis.url, natsUrl, petsUrl: pets.url, keysFile }));
    // The first region makes the stream, so it lives there (what a cut of another region leaves).
    const deadline = Date.now() + 60_000;
    while (!(await regionsView(gateways.at(-1))) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }
  await untilConverged(gateways);
  return { nats, gateways, delayMs, home: await streamHome(nats) };
}

async function main() {
  const pets = await startPets();
  const { file, keys } = writeKeys(DELAYS.length * Object.keys(SCENARIOS).length);
  const results = { regions: REGIONS, limit: LIMIT, fillSeconds: FILL_S, syncMs: SYNC_MS, delays: {} };
  let k = 0;
  for (const delayMs of DELAYS) {
    process.stderr.write(`bench:regions: ${REGIONS.length} regions, ${delayMs} ms between them\n`);
    const w = await world(delayMs, pets, file);
    const out = { streamHome: w.home, scenarios: {} };
    for (const [name, run] of Object.entries(SCENARIOS)) {
      if (args.scenarios && !args.scenarios.split(',').includes(name)) continue;
      out.scenarios[name] = await run(w, keys[k++]);
      const { admittedPerLimit, bound: b } = out.scenarios[name];
      process.stderr.write(`bench:regions:   ${name}: admitted ÷ limit ${admittedPerLimit}, bound ${b}\n`);
    }
    results.delays[delayMs] = out;
    for (const child of [...w.gateways.map((g) => g.process), ...Object.values(w.nats.servers)]) {
      child.stopping = true;
      child.kill('SIGTERM');
    }
    await Promise.all(Object.values(w.nats.proxies).map((p) => p.close()));
  }
  writeFileSync(args.out, `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(results.delays, (key, v) => (key === 'perRegion' ? undefined : v), 2)}\n`);
}

main()
  .then(stopAll)
  .then(() => process.exit(0))
  .catch(async (err) => {
    process.stderr.write(`bench:regions: ${err.stack}\n`);
    await stopAll();
    process.exit(1);
  });
