// npm run bench:profile [-- --seconds 10 --connections 32 --log-level info --keys 1 --out DIR]
// A CPU profile (node --cpu-prof) of the gateway as users run it, at saturation, in front of the
// bench's pets service and its own redis-server; then where the samples fell: per package (or the
// gateway's and common's own code, node's internals, GC, idle) and the costliest functions by
// self time. `--bare` profiles the bench's bare proxy instead, for comparison. `--keys N` sends N keys in turn (from one API_KEYS_FILE, as the bench's many-keys
// run does). `--customers N`: N customers of 3 keys each instead, every key sent in turn (as the
// many-customers run does). The .cpuprofile stays in --out for Chrome DevTools or speedscope.
// Beside the profile: Redis's INFO commandstats over the profiled seconds per request (calls and
// usec of each command, the script's inner commands included) and the host's load average at the
// start and the end, to read the seconds against.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { Redis } from 'ioredis';
import { customersWithKeys } from './many-customers.mjs';
import { rotating } from './many-keys.mjs';
import { cpuMicros, freePort, start, startRedis, stopAll, waitFor } from './processes.mjs';
import { commandCounters, countersDelta } from './redis-commands.mjs';
import { cannon } from './rounds.mjs';
import { startPets } from './subjects.mjs';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
    'log-level': { type: 'string' },
    keys: { type: 'string', default: '1' },
    customers: { type: 'string' },
    out: { type: 'string' },
    top: { type: 'string', default: '25' },
    // The bare proxy (bench/bare-proxy.mjs) instead of the gateway, to hold the two side by side.
    bare: { type: 'boolean', default: false },
  },
});

/** Where a profile node's code lives: a package, the services' own code, node's internals, or a V8 bucket. */
function bucket(frame) {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === '(garbage collector)') return '(garbage collector)';
    if (functionName === '(idle)') return '(idle)';
    if (functionName === '(program)') return '(program)';
    return '(native)';
  }
  if (url.startsWith('node:')) return 'node internals';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const service = /services\/(\w+)\/(?:dist|src)\//.exec(url);
  if (service) return `${service[1]} (own code)`;
  return url;
}

/**
 * `window`: [from, to] in ms since the process was spawned, the measured load: samples of the
 * start-up and the warm-up are left out (the profile's clock starts as the process does, within
 * a few ms).
 */
function summarize(profile, top, window) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let total = 0;
  let at = 0;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] / 1000;
    if (at < window[0] || at > window[1]) return;
    total++;
    self.set(id, (self.get(id) ?? 0) + 1);
  });
  const buckets = new Map();
  const functions = new Map();
  for (const [id, count] of self) {
    const frame = byId.get(id).callFrame;
    const b = bucket(frame);
    buckets.set(b, (buckets.get(b) ?? 0) + count);
    const name = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/services\//, '')}:${frame.lineNumber + 1}`;
    functions.set(name, (functions.get(name) ?? 0) + count);
  }
  const idle = buckets.get('(idle)') ?? 0;
  const busy = total - idle;
  const pct = (n) => `${((100 * n) / busy).toFixed(1).padStart(5)} %`;
  const lines = [
    `samples ${total}, busy ${busy} (${((100 * busy) / total).toFixed(0)} %); shares of the busy samples:`,
  ];
  for (const [b, n] of [...buckets].filter(([b]) => b !== '(idle)').sort((x, y) => y[1] - x[1])) {
    if (n / busy >= 0.001) lines.push(`  ${pct(n)}  ${b}`);
  }
  lines.push(`costliest ${top} functions by self time:`);
  const busyFunctions = [...functions].filter(([f]) => !f.startsWith('(idle)'));
  for (const [f, n] of busyFunctions.sort((x, y) => y[1] - x[1]).slice(0, top)) lines.push(`  ${pct(n)}  ${f}`);
  return lines.join('\n');
}

/** Each command's calls and usec per request between two readings, the costliest first. */
function commandsPerRequest(before, after, n) {
  const rows = Object.entries(countersDelta(before, after)).map(([name, d]) => ({ name, ...d }));
  rows.sort((a, b) => b.usec - a.usec);
  const lines = [
    "Redis INFO commandstats per request over the profiled seconds (EVALSHA's usec include the commands its script runs, listed too):",
  ];
  for (const { name, calls, usec } of rows) {
    lines.push(
      `  ${name.padEnd(12)} ${(calls / n).toFixed(3).padStart(8)} calls  ${(usec / n).toFixed(2).padStart(8)} usec  (${(usec / calls).toFixed(2)} usec per call)`,
    );
  }
  return lines.join('\n');
}

/** `n` keys without a customer, as the many-keys run's: the keys file's array and their headers. */
function loneKeys(n) {
  const keys = Array.from({ length: n }, (_, i) =>
    createKey({ plan: 'enterprise', name: `profile ${i}`, limits: { perMinute: 1e9, perDay: 1e9 } }),
  );
  return { file: keys.map((k) => toKeyFileEntry(k.record)), authorizations: keys.map((k) => `Bearer ${k.key}`) };
}

async function main() {
  const loadAtStart = loadavg();
  const dir = mkdtempSync(join(tmpdir(), 'bench-profile-'));
  const out = resolve(args.out ?? join(dir, 'profile'));
  mkdirSync(out, { recursive: true });
  const redis = await startRedis();
  const { url: petsUrl } = await startPets();
  const { file: keysFileContents, authorizations } = args.customers
    ? customersWithKeys(Number(args.customers), 'profile')
    : loneKeys(Number(args.keys));
  const keysFile = join(dir, 'keys.json');
  writeFileSync(keysFile, JSON.stringify(keysFileContents));
  const port = await freePort();
  const spawned = performance.now();
  const gateway = start(
    'gateway',
    process.execPath,
    ['--cpu-prof', '--cpu-prof-dir', out, args.bare ? 'bench/bare-proxy.mjs' : 'services/gateway/dist/server.js'],
    {
      PORT: String(port),
      HOST: '127.0.0.1',
      PETS_URL: petsUrl,
      REDIS_URL: redis.url,
      API_KEYS_FILE: keysFile,
      LOG_LEVEL: args['log-level'],
    },
  );
  const url = `http://127.0.0.1:${port}`;
  // The bare proxy has no readiness route: the proxied list answers once it is up.
  await waitFor(args.bare ? `${url}/v1/pets` : `${url}/readyz`);
  const request = rotating(url, authorizations);
  const connections = Number(args.connections);
  await cannon({ ...request, connections, duration: 3 });
  const admin = new Redis(redis.url);
  const scriptCalls = async () =>
    Number(/cmdstat_evalsha:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
  const calls = await scriptCalls();
  const statsBefore = await commandCounters(admin);
  const before = [cpuMicros(gateway.pid), cpuMicros(redis.pid)];
  const from = performance.now() - spawned;
  const result = await cannon({ ...request, connections, duration: Number(args.seconds) });
  const window = [from, performance.now() - spawned];
  const n = result.requests.total;
  const statsAfter = await commandCounters(admin);
  const per = (after, b) => ((after - b) / n).toFixed(1);
  process.stdout.write(
    `${n} requests, ${Math.round(result.requests.average)} req/s, ${result.non2xx} not 2xx; CPU µs per request: gateway ${per(cpuMicros(gateway.pid), before[0])}, Redis ${per(cpuMicros(redis.pid), before[1])}; script calls per request ${((await scriptCalls()) - calls) / n}\n`,
  );
  process.stdout.write(`${commandsPerRequest(statsBefore, statsAfter, n)}\n`);
  admin.disconnect();
  // The profile is written as the process exits: wait for that, however long it takes.
  const exited = new Promise((r) => gateway.once('exit', r));
  gateway.stopping = true;
  gateway.kill('SIGTERM');
  await exited;
  await stopAll();
  const file = readdirSync(out).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no profile written in ${out}`);
  process.stdout.write(`${summarize(JSON.parse(readFileSync(join(out, file), 'utf8')), Number(args.top), window)}\n`);
  process.stdout.write(`profile: ${join(out, file)}\n`);
  const loads = (l) => l.map((x) => x.toFixed(2)).join(' ');
  process.stdout.write(
    `host load average (1, 5, 15 min): ${loads(loadAtStart)} at the start, ${loads(loadavg())} at the end\n`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench:profile failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
