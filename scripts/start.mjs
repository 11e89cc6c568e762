// Starts the whole stack from the build (`npm start` builds first, in its prestart script): pets,
// then the gateway in front of it. With no MONGO_URL it seeds one demo key per plan: each run in
// memory (no Redis either), once in Redis (REDIS_URL, where keys then live). The admin token it
// generates is kept in a file, so the same token works after a restart.
//
// `npm start` runs this as `exec node scripts/start.mjs`, so this process is npm's direct child:
// npm forwards SIGINT and SIGTERM to its child, and a `sh -c` in between would die of them
// without passing them on, orphaning the stack.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { ConfigError } from '@animal-store/common/env.js';
import { localBaseUrl } from '@animal-store/gateway/cli/admin-client.js';
import { loadConfig as loadGatewayConfig } from '@animal-store/gateway/config.js';
import { loadConfig as loadPetsConfig } from '@animal-store/pets/config.js';

/** A stopping child gets this long (SHUTDOWN_GRACE_MS) to close, then SIGKILL: the stack is down within 5 s. */
const CHILD_GRACE_MS = 3_000;
const KILL_AFTER_MS = 4_000;

const env = process.env;
const host = env.HOST ?? '127.0.0.1';
const adminHost = env.ADMIN_HOST ?? '127.0.0.1';
// On loopback under npm start, like the API: a deployment opens it (PORTAL_HOST=0.0.0.0).
const portalHost = env.PORTAL_HOST ?? '127.0.0.1';

function fail(message) {
  process.stderr.write(`npm start: ${message}\n`);
  process.exit(1);
}

function portFrom(variable, fallback) {
  const text = env[variable] ?? String(fallback);
  const port = Number(text);
  if (!/^[0-9]+$/.test(text) || port < 1 || port > 65_535) fail(`${variable}=${text} is not a port (1-65535)`);
  return port;
}

const listeners = [
  { variable: 'PORT', what: 'the gateway', host, port: portFrom('PORT', 8080) },
  { variable: 'ADMIN_PORT', what: 'the admin API', host: adminHost, port: portFrom('ADMIN_PORT', 8081) },
  // Pets only needs to be reachable by the gateway.
  { variable: 'PETS_PORT', what: 'the pets service', host: '127.0.0.1', port: portFrom('PETS_PORT', 8090) },
  // Prometheus scrapes these; on loopback under npm start.
  { variable: 'METRICS_PORT', what: "the gateway's metrics", host: '127.0.0.1', port: portFrom('METRICS_PORT', 9464) },
  {
    variable: 'PETS_METRICS_PORT',
    what: "the pets service's metrics",
    host: '127.0.0.1',
    port: portFrom('PETS_METRICS_PORT', 9465),
  },
  { variable: 'PORTAL_PORT', what: "the customers' portal", host: portalHost, port: portFrom('PORTAL_PORT', 8082) },
];
const [gateway, admin, pets, gatewayMetrics, petsMetrics, portal] = listeners;

for (const [i, a] of listeners.entries()) {
  const clash = listeners.slice(i + 1).find((b) => b.port === a.port);
  if (clash) fail(`${a.variable} and ${clash.variable} are both ${a.port}; give each its own port`);
}

/** Whether something already listens there; the stack would otherwise die half-started with EADDRINUSE. */
function portProblem({ host: h, port }) {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err) => resolve(err.code ?? String(err)));
    probe.listen({ host: h, port, exclusive: true }, () => probe.close(() => resolve(null)));
  });
}

const embedded = !env.MONGO_URL;

/**
 * The admin token: ADMIN_TOKEN when set; else the one kept in ADMIN_TOKEN_FILE (default
 * .npm-start/admin-token), made there on the first start, readable by its owner only. A token
 * made for each run would lock the exported shell line out of a stack restarted over durable keys.
 */
function keptToken() {
  const file = resolve(env.ADMIN_TOKEN_FILE ?? '.npm-start/admin-token');
  let text;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    if (err.code !== 'ENOENT') fail(`ADMIN_TOKEN_FILE=${file} cannot be read (${err.code}); fix or remove it`);
  }
  if (text) return { token: text, file, made: false };
  const token = randomBytes(24).toString('base64url');
  try {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
  } catch (err) {
    fail(`cannot keep the admin token in ${file} (${err.code}); set ADMIN_TOKEN_FILE to a writable path`);
  }
  return { token, file, made: true };
}
const kept = env.ADMIN_TOKEN ? undefined : keptToken();
const adminToken = env.ADMIN_TOKEN ?? kept.token;

const serviceEnv = (extra) => ({
  ...env,
  SHUTDOWN_GRACE_MS: env.SHUTDOWN_GRACE_MS ?? String(CHILD_GRACE_MS),
  ...extra,
});
const petsEnv = serviceEnv({
  PORT: String(pets.port),
  HOST: pets.host,
  METRICS_HOST: petsMetrics.host,
  METRICS_PORT: String(petsMetrics.port),
});
const gatewayEnv = serviceEnv({
  PORT: String(gateway.port),
  HOST: host,
  ADMIN_HOST: adminHost,
  ADMIN_PORT: String(admin.port),
  PORTAL_HOST: portal.host,
  PORTAL_PORT: String(portal.port),
  METRICS_HOST: gatewayMetrics.host,
  METRICS_PORT: String(gatewayMetrics.port),
  ADMIN_TOKEN: adminToken,
  PETS_URL: env.PETS_URL ?? `http://127.0.0.1:${pets.port}`,
});

// Both services' configurations are checked before either starts, each in the words it would
// use itself: every problem of the stack in one run, not one service's at a time.
let configProblems = '';
let gatewayConfig;
for (const [name, load, serviceEnvironment] of [
  ['gateway', loadGatewayConfig, gatewayEnv],
  ['pets', loadPetsConfig, petsEnv],
]) {
  try {
    const config = load(serviceEnvironment);
    if (name === 'gateway') gatewayConfig = config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    configProblems += `${name}: ${err.message}\n`;
  }
}

// Every port is probed before anything starts, and every taken one is named at once: a second
// copy of the stack holds all six, and one per run would take six tries to learn.
const taken = [];
for (const l of listeners) {
  const problem = await portProblem(l);
  if (problem) taken.push({ ...l, problem });
}
process.stderr.write(configProblems);
if (taken.length === 1) {
  const [l] = taken;
  fail(
    l.problem === 'EADDRINUSE'
      ? `port ${l.port} (${l.what}) is already in use on ${l.host}; set ${l.variable} to a free port`
      : `cannot listen on ${l.host}:${l.port} (${l.what}): ${l.problem}; set ${l.variable} to another port`,
  );
} else if (taken.length > 1) {
  const why = (l) => (l.problem === 'EADDRINUSE' ? 'in use' : l.problem);
  fail(
    `${taken.length} ports are taken; set each variable to a free port:\n` +
      taken.map((l) => `  ${l.variable}=${l.port}  ${why(l)} on ${l.host} (${l.what})`).join('\n'),
  );
}
if (configProblems) process.exit(1);

const children = [];
let stopping = false;

const running = () => children.filter((c) => c.exitCode === null && c.signalCode === null);

function stop(code) {
  if (stopping) return;
  stopping = true;
  for (const child of running()) child.kill('SIGTERM');
  const killer = setTimeout(() => {
    for (const child of running()) child.kill('SIGKILL');
  }, KILL_AFTER_MS);
  Promise.all(running().map((c) => new Promise((r) => c.once('exit', r)))).then(() => {
    clearTimeout(killer);
    process.exit(code);
  });
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stop(0));
// Whatever ends this process (an uncaught error included) ends the stack with it.
process.on('exit', () => {
  for (const child of running()) child.kill('SIGKILL');
});

// Made through the admin API once the gateway is up, so they are stored keys like any other:
// the keys CLI can update, rotate and revoke them (a keys file's entries refuse all three).
const seedDemoKeys = embedded && !env.API_KEYS_FILE;
const demoKeys = [];
/** Demo keys an earlier run made in the durable store: listed by id, their secrets were shown then. */
const keptDemoKeys = [];
/** The limits a demo key of a plan without windows (the spec's enterprise) gets. */
const OWN_LIMITS = { perMinute: 5_000, perDay: 1_000_000 };

// In a terminal the JSON log lines are hard to read: one pretty line each instead. Piped
// (CI, a log collector) they stay JSON; so they do without pino-pretty (a dev dependency).
const pretty = process.stdout.isTTY
  ? await import('pino-pretty').then(
      (m) => m.default,
      () => null,
    )
  : null;

/** How long a service may take from its start to its `ready` message before the stack gives up. */
const READY_WITHIN_MS = 60_000;

function start(name, script, childEnv) {
  // Forked with an IPC channel: the service's server.ts sends `{ ready: true }` on it once every
  // listener of it listens. Nothing polls it over HTTP, so no probe request reaches its logs.
  const child = fork(script, [], {
    env: childEnv,
    execPath: process.execPath,
    stdio: ['ignore', pretty ? 'pipe' : 'inherit', 'inherit', 'ipc'],
    // Its own process group: Ctrl-C reaches only this process, which then stops each child once.
    // (A second signal would make a child skip its graceful close.)
    detached: true,
  });
  if (pretty && child.stdout) {
    child.stdout.pipe(
      pretty({
        singleLine: true,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname,service',
        messageFormat: `${name.padEnd(7)} {msg}`,
        sync: true,
      }),
    );
  }
  child.on('exit', (code, signal) => {
    if (!stopping) {
      process.stderr.write(`\n${name} exited (${signal ?? code}); stopping the stack\n`);
      stop(1);
    }
  });
  children.push(child);
  return child;
}

/**
 * Resolves when `child` says it listens on all its ports; its exit before that stops the stack
 * (start's exit handler), and this never resolves then. The channel is closed once it has spoken,
 * so it keeps neither process alive.
 */
function ready(child, name) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${name} did not say it was ready within ${READY_WITHIN_MS / 1000} s`));
    }, READY_WITHIN_MS);
    child.on('message', (message) => {
      if (message?.ready !== true) return;
      clearTimeout(timer);
      if (child.connected) child.disconnect();
      resolve();
    });
    child.once('exit', () => clearTimeout(timer));
  });
}

const gatewayUrl = localBaseUrl(host, gateway.port);
/** Where keys and customers live in each mode (the gateway's config.keysIn), for the banner. */
const STORE_LINES = {
  memory: 'in memory, gone when the stack stops (set REDIS_URL or MONGO_URL to keep them)',
  redis: 'in Redis (REDIS_URL), kept across restarts while Redis keeps its data',
  mongo: 'in MongoDB (MONGO_URL)',
};
const adminUrl = localBaseUrl(adminHost, admin.port);
const portalUrl = localBaseUrl(portal.host, portal.port);

/** How long the launcher waits for the key store (Redis) to answer its first admin call. */
const STORE_WITHIN_MS = 30_000;
let storeWaitSaid = false;

/**
 * An admin call of the launcher's, asked again while it answers 503: the gateway listens before
 * its Redis connection is up (it serves in Redis's absence, by design), so the first call of a
 * stack started with REDIS_URL can meet `store_unavailable`. A creation is safe to repeat: a 503
 * is never done later (fenced writes, docs/redis.md). Said once, then the banner as usual.
 */
async function adminCall(path, init = {}) {
  const giveUpAt = Date.now() + STORE_WITHIN_MS;
  for (;;) {
    const response = await fetch(`${adminUrl}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${adminToken}`, ...init.headers },
    });
    if (response.status !== 503 || Date.now() >= giveUpAt) return response;
    await response.body?.cancel();
    if (!storeWaitSaid) {
      storeWaitSaid = true;
      process.stderr.write(`Waiting for Redis (REDIS_URL) to answer, up to ${STORE_WITHIN_MS / 1000} s...\n`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function createDemoKey(plan, limits) {
  const response = await adminCall('/admin/keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ plan, name: `demo-${plan}`, ...(limits ? { limits } : {}) }),
  });
  const body = await response.text();
  if (!response.ok) throw new Error(`the admin API refused the ${plan} demo key (${response.status} ${body})`);
  return JSON.parse(body);
}

/** The live demo keys an earlier run left in a durable store (Redis), by plan. */
async function existingDemoKeys() {
  const byPlan = new Map();
  if (gatewayConfig.keysIn === 'memory') return byPlan;
  let after;
  do {
    const query = new URLSearchParams({ name: 'demo-', revoked: 'false', limit: '500', ...(after ? { after } : {}) });
    const response = await adminCall(`/admin/keys?${query}`);
    const body = await response.text();
    if (!response.ok) throw new Error(`the admin API did not list the demo keys (${response.status} ${body})`);
    const page = JSON.parse(body);
    for (const k of page.items) if (k.name === `demo-${k.plan}` && !byPlan.has(k.plan)) byPlan.set(k.plan, k);
    after = page.next ?? undefined;
  } while (after);
  return byPlan;
}

try {
  await ready(start('pets', 'services/pets/dist/server.js', petsEnv), 'pets');
  await ready(start('gateway', 'services/gateway/dist/server.js', gatewayEnv), 'gateway');
  if (seedDemoKeys) {
    // Seeded once into a durable store: a restart finds them there and makes none again.
    const existing = await existingDemoKeys();
    // One per plan in force (PLANS_FILE's, else the spec's four); a plan without windows has keys
    // that carry their own limits, so its demo key gets the spec's enterprise example.
    for (const [plan, definition] of gatewayConfig.plans.plans) {
      const earlier = existing.get(plan);
      if (earlier) {
        keptDemoKeys.push({ plan, id: earlier.id, prefix: earlier.prefix ?? '' });
        continue;
      }
      const { id, key } = await createDemoKey(plan, definition.windows ? undefined : OWN_LIMITS);
      demoKeys.push({ plan, id, key, reads: definition.scopes.includes('pets:read') });
    }
  }
} catch (err) {
  // Never leave a half-started stack holding the ports.
  process.stderr.write(`${err.message}; stopping the stack\n`);
  stop(1);
  await new Promise(() => {});
}

const lines = [
  '',
  `  Animal store API is up: ${gatewayUrl}/v1  (docs: ${gatewayUrl}/docs)`,
  `  Admin API: ${adminUrl}/admin/keys`,
  `  Console:   ${adminUrl}/console  (sign in with the admin token)`,
  `  Portal:    ${portalUrl}/portal  (customers sign in with a link from POST /admin/customers/ID/portal-sessions)`,
  `  Metrics:   ${localBaseUrl(gatewayMetrics.host, gatewayMetrics.port)}/metrics  (pets: ${localBaseUrl(petsMetrics.host, petsMetrics.port)}/metrics)`,
  kept
    ? `  Admin token: ${kept.made ? 'made and kept' : 'kept'} in ${kept.file} (below; delete the file for a new one)`
    : '  Admin token: from ADMIN_TOKEN',
  `  Keys and customers: ${STORE_LINES[gatewayConfig.keysIn]}`,
];
if (keptDemoKeys.length > 0) {
  lines.push(
    '  Demo keys kept from an earlier run (their keys were shown then; `npm run -s keys -- rotate ID` gives a new one):',
  );
  const width = Math.max(10, ...keptDemoKeys.map((k) => k.plan.length));
  for (const k of keptDemoKeys) lines.push(`    ${k.plan.padEnd(width)} ${k.id.padEnd(20)} ${k.prefix}…`);
}
if (demoKeys.length > 0) {
  lines.push(
    gatewayConfig.keysIn === 'memory'
      ? '  Demo keys (in memory; they last until you stop the stack):'
      : '  Demo keys (made once, kept in Redis):',
  );
  const width = Math.max(10, ...demoKeys.map((k) => k.plan.length));
  lines.push(`    ${'plan'.padEnd(width)} ${'id'.padEnd(20)} key`);
  for (const k of demoKeys) lines.push(`    ${k.plan.padEnd(width)} ${k.id.padEnd(20)} ${k.key}`);
  const reader = demoKeys.find((k) => k.reads);
  if (reader) lines.push('', '  Try:', `    curl -i -H "Authorization: Bearer ${reader.key}" ${gatewayUrl}/v1/pets`);
}
lines.push(
  '',
  '  For the keys CLI (npm run keys -- list) and the admin API, in another shell:',
  kept
    ? `    export ADMIN_URL=${adminUrl} ADMIN_TOKEN=${kept.token}`
    : `    export ADMIN_URL=${adminUrl}   # ADMIN_TOKEN: the one you set`,
  '',
  '  Ctrl-C stops the stack.',
  '',
);
// Piped, stdout carries the services' JSON log lines and nothing else, so a log collector reads
// every line; the banner (keys and token included) goes to stderr then.
(process.stdout.isTTY ? process.stdout : process.stderr).write(`${lines.join('\n')}\n`);
