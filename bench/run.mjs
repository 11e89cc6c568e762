// npm run bench [-- --out FILE] [--duration SECONDS]
// Measures, in one run on loopback: the pets service alone (direct), a bare @fastify/http-proxy
// in front of it, and the real gateway (real Redis) in front of it. Prints a table and ratios.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { generateApiKey, hashApiKey } from '../services/gateway/dist/keys/api-key.js';

const { values: args } = parseArgs({
  options: {
    out: { type: 'string' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    runs: { type: 'string', default: '3' },
  },
});
const DURATION = Number(args.duration);
const WARMUP = Number(args.warmup);
const CONNECTIONS = Number(args.connections);
const RUNS = Number(args.runs);

const children = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});
process.on('SIGINT', () => process.exit(130));

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** CPU time (user + system) of a process in microseconds, from /proc (Linux). */
function cpuMicros(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
  } catch {
    return Number.NaN;
  }
}

function start(name, command, argv, env = {}) {
  const child = spawn(command, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  child.on('exit', (code) => {
    if (code && code !== 0 && !child.stopping) process.stderr.write(`${name} exited ${code}: ${stderr}\n`);
  });
  children.push(child);
  return child;
}

async function waitFor(url) {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not ready: ${url}`);
}

async function startRedis() {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, pid: null };
  const port = await freePort();
  const child = start('redis-server', 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
  ]);
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => 50 });
  probe.on('error', () => {});
  await probe.connect().catch(() => {});
  for (let i = 0; i < 100 && probe.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 50));
  probe.disconnect();
  return { url, pid: child.pid };
}

function cannon(opts) {
  return new Promise((resolve, reject) => {
    autocannon({ connections: CONNECTIONS, pipelining: 1, ...opts }, (err, result) =>
      err ? reject(err) : resolve(result),
    );
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Warm-up, then RUNS measured runs; the run with the median requests/s is reported. */
async function measure(label, request, expectStatus) {
  await cannon({ ...request, duration: WARMUP });
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const r = await cannon({ ...request, duration: DURATION });
    const statusOk = expectStatus === 200 ? r['2xx'] : (r.statusCodeStats?.[expectStatus]?.count ?? 0);
    if (statusOk < r.requests.total * 0.99 || r.errors > 0 || r.timeouts > 0) {
      throw new Error(
        `${label}: expected ${expectStatus}, got ${JSON.stringify(r.statusCodeStats)} errors=${r.errors}`,
      );
    }
    runs.push({ rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, total: r.requests.total });
  }
  const mid = median(runs.map((r) => r.rps));
  const chosen = runs.find((r) => r.rps === mid);
  process.stdout.write(
    `  ${label.padEnd(34)} ${mid.toFixed(0).padStart(8)} req/s  p50 ${chosen.p50} ms  p99 ${chosen.p99} ms\n`,
  );
  return { requestsPerSecond: Math.round(mid), p50Ms: chosen.p50, p99Ms: chosen.p99, runs };
}

async function commandStats(redis) {
  const text = await redis.info('commandstats');
  const stats = {};
  for (const m of text.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) stats[m[1]] = Number(m[2]);
  return stats;
}

function delta(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

/** Requests the gateway sent to Redis itself (EVALSHA counts once; the script's inner calls are listed apart). */
function clientCommands(d) {
  const scriptInner = ['get', 'mget', 'incr', 'incrby', 'pttl', 'pexpire', 'set', 'del'];
  let total = 0;
  for (const [k, v] of Object.entries(d)) {
    if (k === 'info' || k.startsWith('client') || k === 'config|resetstat') continue;
    if (!scriptInner.includes(k)) total += v;
  }
  return total;
}

async function main() {
  const redis = await startRedis();
  const admin = new Redis(redis.url);
  const [petsPort, proxyPort, gatewayPort] = [await freePort(), await freePort(), await freePort()];
  const petsUrl = `http://127.0.0.1:${petsPort}`;
  const petsProcess = start('pets', process.execPath, ['services/pets/dist/server.js'], {
    PORT: String(petsPort),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
  });
  await waitFor(`${petsUrl}/readyz`);
  for (let i = 0; i < 40; i++) {
    await fetch(`${petsUrl}/v1/pets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: `pet-${i}`, categoryId: i % 5, status: 'available' }),
    });
  }

  const bareProcess = start('bare-proxy', process.execPath, ['bench/bare-proxy.mjs'], {
    PORT: String(proxyPort),
    PETS_URL: petsUrl,
  });
  await waitFor(`http://127.0.0.1:${proxyPort}/v1/pets`);

  const dir = mkdtempSync(join(tmpdir(), 'bench-'));
  const keys = { open: generateApiKey(), limited: generateApiKey(), banned: generateApiKey() };
  const prefix = `bench${randomUUID().slice(0, 6)}:`;
  writeFileSync(
    join(dir, 'keys.json'),
    JSON.stringify([
      {
        id: 'bench_open',
        name: 'open',
        plan: 'enterprise',
        limits: { perMinute: 1e9, perDay: 1e9 },
        sha256: hashApiKey(keys.open),
      },
      {
        id: 'bench_limited',
        name: 'limited',
        plan: 'enterprise',
        limits: { perMinute: 1, perDay: 1e9 },
        sha256: hashApiKey(keys.limited),
      },
      { id: 'bench_banned', name: 'banned', plan: 'free', sha256: hashApiKey(keys.banned) },
    ]),
  );
  const gatewayProcess = start('gateway', process.execPath, ['services/gateway/dist/server.js'], {
    PORT: String(gatewayPort),
    HOST: '127.0.0.1',
    PETS_URL: petsUrl,
    REDIS_URL: redis.url,
    REDIS_PREFIX: prefix,
    API_KEYS_FILE: join(dir, 'keys.json'),
    LOG_LEVEL: 'warn',
    // The 429 scenario measures refusals; a ban would turn it into the banned scenario.
    BAN_THRESHOLD: '1000000',
  });
  await waitFor(`http://127.0.0.1:${gatewayPort}/readyz`);
  await admin.set(`${prefix}{bench_banned}:ban`, '1', 'PX', 3_600_000);

  const targets = {
    direct: `http://127.0.0.1:${petsPort}`,
    bareProxy: `http://127.0.0.1:${proxyPort}`,
    gateway: `http://127.0.0.1:${gatewayPort}`,
  };
  const auth = (key) => ({ authorization: `Bearer ${key}` });
  const post = {
    method: 'POST',
    body: JSON.stringify({ name: 'bench', categoryId: 1 }),
    headers: { 'content-type': 'application/json' },
  };

  process.stdout.write(
    `\nbench: ${CONNECTIONS} connections, no pipelining, keep-alive, ${WARMUP}s warm-up, median of ${RUNS} × ${DURATION}s\n`,
  );
  const results = {
    scenarios: {},
    ratios: {},
    redis: {},
    config: { connections: CONNECTIONS, duration: DURATION, warmup: WARMUP, runs: RUNS },
  };
  process.stdout.write('GET /v1/pets?limit=20\n');
  for (const [name, base] of Object.entries(targets)) {
    results.scenarios[`get.${name}`] = await measure(
      `${name}`,
      { url: `${base}/v1/pets?limit=20`, headers: name === 'gateway' ? auth(keys.open) : {} },
      200,
    );
  }
  process.stdout.write('POST /v1/pets\n');
  for (const [name, base] of Object.entries(targets)) {
    results.scenarios[`post.${name}`] = await measure(
      `${name}`,
      {
        url: `${base}/v1/pets`,
        ...post,
        headers: { ...post.headers, ...(name === 'gateway' ? auth(keys.open) : {}) },
      },
      201,
    );
  }

  process.stdout.write('gateway refusals\n');
  await fetch(`${targets.gateway}/v1/pets`, { headers: auth(keys.limited) });
  results.scenarios['get.gateway429'] = await measure(
    'over the limit (429)',
    { url: `${targets.gateway}/v1/pets?limit=20`, headers: auth(keys.limited) },
    429,
  );
  results.scenarios['get.gatewayBanned'] = await measure(
    'banned key (429)',
    { url: `${targets.gateway}/v1/pets?limit=20`, headers: auth(keys.banned) },
    429,
  );

  // Redis commands per request, from Redis's own counters.
  const count = async (request, n) => {
    const before = await commandStats(admin);
    const r = await cannon({ ...request, amount: n, connections: 8 });
    const d = delta(before, await commandStats(admin));
    return { requests: r.requests.total, commands: d, clientCommandsPerRequest: clientCommands(d) / r.requests.total };
  };
  const admitted = await count({ url: `${targets.gateway}/v1/pets?limit=20`, headers: auth(keys.open) }, 2000);
  const banned = await count({ url: `${targets.gateway}/v1/pets?limit=20`, headers: auth(keys.banned) }, 2000);
  results.redis = { admitted, banned };

  // Latency the gateway adds at half of its own maximum throughput.
  const half = Math.round(results.scenarios['get.gateway'].requestsPerSecond / 2);
  const atHalf = async (base, headers) => {
    const r = await cannon({ url: `${base}/v1/pets?limit=20`, headers, duration: DURATION, overallRate: half });
    return { p50Ms: r.latency.p50, p99Ms: r.latency.p99 };
  };
  const directHalf = await atHalf(targets.direct, {});
  const gatewayHalf = await atHalf(targets.gateway, auth(keys.open));
  results.addedLatencyAtHalfLoad = {
    rate: half,
    direct: directHalf,
    gateway: gatewayHalf,
    addedP50Ms: gatewayHalf.p50Ms - directHalf.p50Ms,
    addedP99Ms: gatewayHalf.p99Ms - directHalf.p99Ms,
  };

  // CPU per request at a fixed, moderate rate: steadier than throughput on a shared machine, and
  // it shows where the time goes (the gateway process itself, and Redis on its behalf).
  const cpuRate = Math.min(2000, Math.round(results.scenarios['get.direct'].requestsPerSecond / 4));
  const cpuPer = async (pid, base, headers) => {
    await cannon({ url: `${base}/v1/pets?limit=20`, headers, duration: 1, overallRate: cpuRate });
    const before = cpuMicros(pid);
    const redisBefore = redis.pid ? cpuMicros(redis.pid) : Number.NaN;
    const r = await cannon({ url: `${base}/v1/pets?limit=20`, headers, duration: DURATION, overallRate: cpuRate });
    const n = r.requests.total;
    return {
      process: Number(((cpuMicros(pid) - before) / n).toFixed(1)),
      redis: redis.pid ? Number(((cpuMicros(redis.pid) - redisBefore) / n).toFixed(1)) : null,
    };
  };
  results.cpuMicrosPerRequest = {
    rate: cpuRate,
    direct: await cpuPer(petsProcess.pid, targets.direct, {}),
    bareProxy: await cpuPer(bareProcess.pid, targets.bareProxy, {}),
    gateway: await cpuPer(gatewayProcess.pid, targets.gateway, auth(keys.open)),
  };

  const s = results.scenarios;
  const ratio = (a, b) => Number((a / b).toFixed(3));
  results.ratios = {
    'get.gateway/bareProxy': ratio(s['get.gateway'].requestsPerSecond, s['get.bareProxy'].requestsPerSecond),
    'get.bareProxy/direct': ratio(s['get.bareProxy'].requestsPerSecond, s['get.direct'].requestsPerSecond),
    'post.gateway/bareProxy': ratio(s['post.gateway'].requestsPerSecond, s['post.bareProxy'].requestsPerSecond),
    'post.bareProxy/direct': ratio(s['post.bareProxy'].requestsPerSecond, s['post.direct'].requestsPerSecond),
    '429/admitted': ratio(s['get.gateway429'].requestsPerSecond, s['get.gateway'].requestsPerSecond),
    'banned/admitted': ratio(s['get.gatewayBanned'].requestsPerSecond, s['get.gateway'].requestsPerSecond),
  };

  process.stdout.write('\nratios\n');
  for (const [k, v] of Object.entries(results.ratios)) process.stdout.write(`  ${k.padEnd(28)} ${v}\n`);
  process.stdout.write('redis commands per request (sent by the gateway; script internals listed in the JSON)\n');
  process.stdout.write(
    `  admitted ${admitted.clientCommandsPerRequest.toFixed(3)}  ${JSON.stringify(admitted.commands)}\n`,
  );
  process.stdout.write(
    `  banned   ${banned.clientCommandsPerRequest.toFixed(3)}  ${JSON.stringify(banned.commands)}\n`,
  );
  const a = results.addedLatencyAtHalfLoad;
  process.stdout.write(
    `latency added at ${a.rate} req/s (50% of gateway max): p50 +${a.addedP50Ms} ms, p99 +${a.addedP99Ms} ms\n`,
  );
  const c = results.cpuMicrosPerRequest;
  process.stdout.write(
    `CPU µs per request at ${c.rate} req/s: pets ${c.direct.process}, bare proxy ${c.bareProxy.process}, ` +
      `gateway ${c.gateway.process} (+ Redis ${c.gateway.redis ?? 'n/a'})\n`,
  );
  if (args.out) {
    writeFileSync(args.out, `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(`wrote ${args.out}\n`);
  }
  admin.disconnect();
  for (const c of children) {
    c.stopping = true;
    c.kill('SIGTERM');
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
