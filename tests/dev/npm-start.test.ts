import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisProcess } from '../support/redis.js';
import { freePort, scriptBinary } from '../support/runtime.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Ports {
  PORT: number;
  ADMIN_PORT: number;
  PETS_PORT: number;
  METRICS_PORT: number;
  PETS_METRICS_PORT: number;
  PORTAL_PORT: number;
}

interface Started {
  npm: ChildProcess;
  ports: Ports;
  tmp: string;
  /** Where this run keeps its admin token (ADMIN_TOKEN_FILE), out of the repository and TMPDIR. */
  state: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Types Ctrl-C where the stack runs in a terminal of its own. */
  interrupt?: () => void;
}

const started: Started[] = [];

afterEach(async () => {
  for (const s of started.splice(0)) {
    // A test that failed midway: stop the stack the way a terminal would (its process group; the
    // services are in their own groups and are stopped by start.mjs), then make sure.
    if (s.npm.exitCode === null && s.npm.signalCode === null && s.npm.pid) {
      // In a pseudo-terminal the stack is in the terminal's own session: Ctrl-C is what reaches it.
      s.interrupt?.();
      signalGroup(s.npm.pid, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(s.npm.pid!, 'SIGKILL'), 5_000);
      await s.exited;
      clearTimeout(timer);
    }
    rmSync(s.tmp, { recursive: true, force: true });
    rmSync(s.state, { recursive: true, force: true });
  }
});

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

async function freePorts(): Promise<Ports> {
  // Never the defaults (8080, 8081, 8082, 8090, 9464, 9465): another stack may be running on this machine.
  return {
    PORT: await freePort(),
    ADMIN_PORT: await freePort(),
    PETS_PORT: await freePort(),
    METRICS_PORT: await freePort(),
    PETS_METRICS_PORT: await freePort(),
    PORTAL_PORT: await freePort(),
  };
}

/**
 * `npm start` exactly as a user types it, but on free ports, in its own process group (as a shell
 * would run it) and with its own TMPDIR. `--ignore-scripts` skips only the prestart build, which
 * `npm test` has already done.
 */
function npmStart(ports: Ports, npmArgs: string[] = [], extraEnv: NodeJS.ProcessEnv = {}): Started {
  const tmp = mkdtempSync(join(tmpdir(), 'npm-start-test-'));
  const state = mkdtempSync(join(tmpdir(), 'npm-start-state-'));
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp, LOG_LEVEL: 'warn' };
  for (const name of ['HOST', 'ADMIN_HOST', 'ADMIN_TOKEN', 'API_KEYS_FILE', 'MONGO_URL', 'REDIS_URL', 'PETS_URL']) {
    delete env[name];
  }
  env.ADMIN_TOKEN_FILE = join(state, 'admin-token');
  for (const [name, port] of Object.entries(ports)) env[name] = String(port);
  Object.assign(env, extraEnv);
  const npm = spawn('npm', [...npmArgs, 'start', '--ignore-scripts'], {
    cwd: ROOT,
    env,
    detached: true,
    stdio: 'pipe',
  });
  let out = '';
  let err = '';
  npm.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  npm.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exited = once(npm, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  const s: Started = { npm, ports, tmp, state, stdout: () => out, stderr: () => err, exited };
  started.push(s);
  return s;
}

/** The banner, once it is whole: on stderr when stdout is piped, on the terminal otherwise. */
async function untilUp(s: Started): Promise<string> {
  const banner = () => [s.stderr(), s.stdout()].find((text) => text.includes('Ctrl-C stops the stack.'));
  for (let text = banner(); ; text = banner()) {
    if (text !== undefined) return text;
    const ended = await Promise.race([
      s.exited,
      once(s.npm.stdout!, 'data').then(() => null),
      ...(s.npm.stderr ? [once(s.npm.stderr, 'data').then(() => null)] : []),
    ]);
    if (ended) throw new Error(`npm start exited (${ended.code ?? ended.signal}):\n${s.stdout()}\n${s.stderr()}`);
  }
}

function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe: Server = createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host: '127.0.0.1', port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/**
 * What npm start left in its TMPDIR. TypeScript's compiler (the build before the start) turns on
 * Node's module compile cache, which Node 22+ keeps in TMPDIR/node-compile-cache: Node's, kept on
 * purpose, not something the stack forgot.
 */
const leftBehind = (tmp: string) => readdirSync(tmp).filter((name) => name !== 'node-compile-cache');

/** Lines npm itself may print on this machine (config warnings), which are not the script's. */
const ownLines = (text: string) => text.split('\n').filter((l) => l !== '' && !l.startsWith('npm warn'));

async function expectStoppedCleanly(s: Started): Promise<void> {
  const exit = await s.exited;
  expect(exit).toEqual({ code: 0, signal: null });
  for (const port of Object.values(s.ports)) expect(await listenable(port)).toBe(true);
  // Nothing left behind in TMPDIR.
  expect(leftBehind(s.tmp)).toEqual([]);
}

describe('npm start', () => {
  it('prints each demo key with plan and id, and an export line for the admin API, then serves /v1', async () => {
    const s = npmStart(await freePorts());
    const banner = await untilUp(s);
    const { PORT, ADMIN_PORT } = s.ports;
    expect(banner).toContain(`http://127.0.0.1:${PORT}/v1`);
    for (const plan of ['free', 'pro', 'business', 'enterprise']) {
      expect(banner).toMatch(new RegExp(`^ +${plan} +key_[0-9A-Za-z]{16} +ask_[0-9A-Za-z]{46}$`, 'm'));
    }
    const exportLine = banner.match(/^ +export ADMIN_URL=(\S+) ADMIN_TOKEN=(\S+)$/m);
    expect(exportLine?.[1]).toBe(`http://127.0.0.1:${ADMIN_PORT}`);
    // The printed token and URL work against the admin API, which lists the printed ids.
    const keys = await fetch(`${exportLine?.[1]}/admin/keys`, {
      headers: { authorization: `Bearer ${exportLine?.[2]}` },
    });
    expect(keys.status).toBe(200);
    const listed = JSON.stringify(await keys.json());
    for (const id of banner.match(/key_[0-9A-Za-z]{16}/g) ?? []) expect(listed).toContain(id);
    // The address the banner gives answers with an index rather than 404.
    const index = await fetch(`http://127.0.0.1:${PORT}/v1`);
    expect(index.status).toBe(200);
    // No keys file: nothing is written to TMPDIR.
    expect(leftBehind(s.tmp)).toEqual([]);

    process.kill(s.npm.pid!, 'SIGTERM');
    await expectStoppedCleanly(s);
  });

  it('seeds a demo key for each plan of the documented PLANS_FILE example, which drops pro and business', async () => {
    const page = readFileSync(join(ROOT, 'docs/keys-and-plans.md'), 'utf8');
    const example = /\*\*Plans, scopes and costs \(`PLANS_FILE`\)\.\*\*[\s\S]*?```json\n([\s\S]*?)```/.exec(page)?.[1];
    expect(example, 'docs/keys-and-plans.md has a PLANS_FILE example').toBeDefined();
    const ports = await freePorts();
    const plansFile = join(mkdtempSync(join(tmpdir(), 'npm-start-plans-')), 'plans.json');
    writeFileSync(plansFile, example as string);
    const s = npmStart(ports, [], { PLANS_FILE: plansFile });
    const banner = await untilUp(s);
    const plans = Object.keys(JSON.parse(example as string).plans);
    const seeded = [...banner.matchAll(/^ +(\S+) +key_[0-9A-Za-z]{16} +(ask_[0-9A-Za-z]{46})$/gm)];
    expect(seeded.map((m) => m[1])).toEqual(plans);
    // Each demo key is served (the "Try" line's key first: it reads pets).
    const tryKey = /curl -i -H "Authorization: Bearer (ask_\w+)"/.exec(banner)?.[1];
    expect(tryKey).toBe(seeded[0]?.[2]);
    for (const [, plan, key] of seeded) {
      const res = await fetch(`http://127.0.0.1:${ports.PORT}/v1/pets`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(res.status, plan).toBe(200);
    }
    process.kill(s.npm.pid!, 'SIGTERM');
    await expectStoppedCleanly(s);
    rmSync(dirname(plansFile), { recursive: true, force: true });
  });

  it('piped: every stdout line is a JSON log record; the banner, keys and token are on stderr', async () => {
    // -s: npm's own "> animal-store start" header would otherwise be on stdout too.
    const s = npmStart(await freePorts(), ['-s']);
    const banner = await untilUp(s);
    expect(s.stderr()).toContain('Ctrl-C stops the stack.');
    const token = banner.match(/ADMIN_TOKEN=(\S+)$/m)?.[1] as string;
    const keys = [...new Set(banner.match(/ask_\w+/g))];
    expect(keys).toHaveLength(4);
    process.kill(s.npm.pid!, 'SIGTERM');
    await expectStoppedCleanly(s);
    const lines = s.stdout().split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(JSON.parse(line), line).toMatchObject({ level: expect.any(Number) });
    for (const secret of [token, ...keys]) expect(s.stdout()).not.toContain(secret);
  });

  it('the banner gives the portal’s and the metrics’ addresses, and no readiness probe shows in the logs', async () => {
    // At info every request a service answers is a log line: a readiness probe would be one too.
    const s = npmStart(await freePorts(), ['-s'], { LOG_LEVEL: 'info' });
    const banner = await untilUp(s);
    const { PORT, ADMIN_PORT, PORTAL_PORT, METRICS_PORT, PETS_METRICS_PORT } = s.ports;
    expect(banner).toContain(`http://127.0.0.1:${PORT}/v1`);
    expect(banner).toContain(`http://127.0.0.1:${ADMIN_PORT}/console`);
    const portal = /^ +Portal: +(\S+)/m.exec(banner)?.[1];
    expect(portal).toBe(`http://127.0.0.1:${PORTAL_PORT}/portal`);
    expect((await fetch(portal as string)).status).toBe(200);
    const metrics = /^ +Metrics: +(\S+) +\(pets: (\S+)\)$/m.exec(banner);
    expect(metrics?.slice(1)).toEqual([
      `http://127.0.0.1:${METRICS_PORT}/metrics`,
      `http://127.0.0.1:${PETS_METRICS_PORT}/metrics`,
    ]);
    for (const url of metrics?.slice(1) ?? []) expect((await fetch(url)).status).toBe(200);
    process.kill(s.npm.pid!, 'SIGTERM');
    await expectStoppedCleanly(s);
    const records = s
      .stdout()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { msg: string; service: string; method?: string; path?: string });
    const requests = records.filter((r) => r.msg === 'request').map((r) => `${r.service} ${r.method} ${r.path}`);
    // The requests logged are the demo keys' creation and this test's own (the metrics listeners
    // log none), nothing that polled a service.
    expect(requests.filter((r) => r !== 'gateway-admin POST /admin/keys')).toEqual(['gateway-portal GET /portal']);
    expect(requests).toHaveLength(5);
    // Nor any line about attempts on stderr: the banner and nothing else.
    expect(ownLines(s.stderr()).filter((l) => !l.startsWith('  '))).toEqual([]);
  });

  it('demo keys are ordinary keys: the keys CLI commands update, rotate, revoke and unban them', async () => {
    const s = npmStart(await freePorts());
    const banner = await untilUp(s);
    const [, adminUrl, adminToken] = banner.match(/^ +export ADMIN_URL=(\S+) ADMIN_TOKEN=(\S+)$/m) ?? [];
    const demo = (plan: string) => {
      const [, id, key] = banner.match(new RegExp(`^ +${plan} +(key_\\w+) +(ask_\\w+)$`, 'm')) ?? [];
      return { id: id as string, key: key as string };
    };
    const keys = (...args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
        execFile(
          process.execPath,
          [join(ROOT, 'services/gateway/dist/cli/main.js'), ...args],
          { env: { PATH: process.env.PATH ?? '', ADMIN_URL: adminUrl, ADMIN_TOKEN: adminToken } },
          (error, stdout, stderr) => done({ code: error ? Number(error.code) : 0, stdout, stderr }),
        );
      });
    const call = (key: string) =>
      fetch(`http://127.0.0.1:${s.ports.PORT}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
    const free = demo('free');
    const pro = demo('pro');
    const business = demo('business');

    for (const args of [
      ['list'],
      ['show', free.id],
      ['usage', free.id],
      ['update', free.id, '--plan', 'business'],
      ['unban', free.id],
      ['rotate', pro.id, '--grace', '0'],
      ['revoke', business.id],
    ]) {
      const run = await keys(...args);
      expect(run.stderr, args.join(' ')).toBe('');
      expect(run.code, args.join(' ')).toBe(0);
      if (args[0] === 'list') expect(run.stdout).toMatch(new RegExp(`${free.id} +free .* store +demo-free`));
      if (args[0] === 'rotate') {
        const rotated = /key: (ask_\S+)/.exec(run.stdout)?.[1] as string;
        expect((await call(rotated)).status).toBe(200);
      }
    }
    expect((await call(free.key)).headers.get('x-ratelimit-limit')).toBe('1000');
    expect((await call(pro.key)).status).toBe(401);
    expect((await call(business.key)).status).toBe(401);

    process.kill(s.npm.pid!, 'SIGTERM');
    await expectStoppedCleanly(s);
    // Seven CLI runs, each a Node start.
  }, 60_000);

  it('with REDIS_URL: a key, a customer with its externalId and the admin token outlive Ctrl-C and the same npm start', async () => {
    const redis = await RedisProcess.start();
    const state = mkdtempSync(join(tmpdir(), 'npm-start-kept-'));
    try {
      const tokenFile = join(state, 'admin-token');
      const ports = await freePorts();
      const env = { REDIS_URL: redis.url, ADMIN_TOKEN_FILE: tokenFile };
      const first = npmStart(ports, [], env);
      const banner = await untilUp(first);
      const [, adminUrl, token] = banner.match(/^ +export ADMIN_URL=(\S+) ADMIN_TOKEN=(\S+)$/m) ?? [];
      expect(banner).toContain(`Admin token: made and kept in ${tokenFile}`);
      expect(banner).toContain('Keys and customers: in Redis');
      expect(readFileSync(tokenFile, 'utf8').trim()).toBe(token);
      expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
      const seeded = [...banner.matchAll(/^ +(\S+) +(key_[0-9A-Za-z]{16}) +ask_[0-9A-Za-z]{46}$/gm)].map((m) => m[2]);
      expect(seeded).toHaveLength(4);
      const admin = (path: string, body?: unknown) =>
        fetch(`${adminUrl}${path}`, {
          method: body === undefined ? 'GET' : 'POST',
          headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
      const made = await admin('/admin/keys', { plan: 'pro', name: 'kept' });
      expect(made.status).toBe(201);
      const { id: keyId, key } = (await made.json()) as { id: string; key: string };
      const customer = await admin('/admin/customers', { name: 'Acme', plan: 'pro', externalId: 'cus_StripeKept1' });
      expect(customer.status).toBe(201);
      const { id: customerId } = (await customer.json()) as { id: string };
      const pets = () =>
        fetch(`http://127.0.0.1:${ports.PORT}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
      expect((await pets()).status).toBe(200);
      process.kill(first.npm.pid!, 'SIGINT');
      await expectStoppedCleanly(first);

      const second = npmStart(ports, [], env);
      const again = await untilUp(second);
      expect(again.match(/ADMIN_TOKEN=(\S+)$/m)?.[1]).toBe(token);
      expect(again).toContain(`Admin token: kept in ${tokenFile}`);
      expect((await pets()).status).toBe(200);
      const kept = await admin(`/admin/customers/${customerId}`);
      expect(kept.status).toBe(200);
      expect(await kept.json()).toMatchObject({ id: customerId, name: 'Acme', externalId: 'cus_StripeKept1' });
      const byExternal = (await (await admin('/admin/customers?externalId=cus_StripeKept1')).json()) as {
        items: Array<{ id: string }>;
      };
      expect(byExternal.items.map((c) => c.id)).toEqual([customerId]);
      // The demo keys were seeded once: the restart lists the first run's and makes none.
      expect(again).not.toMatch(/ask_[0-9A-Za-z]{46}$/m);
      for (const id of seeded) expect(again).toContain(id);
      const demo = (await (await admin('/admin/keys?name=demo-')).json()) as { items: Array<{ id: string }> };
      expect(demo.items.map((k) => k.id).sort()).toEqual([...seeded].sort());
      const listed = (await (await admin('/admin/keys?name=kept')).json()) as { items: Array<{ id: string }> };
      expect(listed.items.map((k) => k.id)).toEqual([keyId]);
      process.kill(second.npm.pid!, 'SIGINT');
      await expectStoppedCleanly(second);
    } finally {
      await redis.stop();
      rmSync(state, { recursive: true, force: true });
    }
    // Two npm starts, each a build check and two Node processes.
  }, 90_000);

  it('with REDIS_URL whose Redis is not up yet: waits for it, then seeds the demo keys into it', async () => {
    const redisPort = await freePort();
    const s = npmStart(await freePorts(), [], { REDIS_URL: `redis://127.0.0.1:${redisPort}` });
    // The gateway listens without Redis (it serves in Redis's absence): the launcher's first
    // admin call meets 503 and is asked again, said once, until the store answers.
    while (!s.stderr().includes('Waiting for Redis (REDIS_URL) to answer')) {
      const ended = await Promise.race([s.exited, once(s.npm.stderr!, 'data').then(() => null)]);
      if (ended) throw new Error(`npm start exited (${ended.code ?? ended.signal}):\n${s.stdout()}\n${s.stderr()}`);
    }
    const redis = await RedisProcess.start(redisPort);
    try {
      const banner = await untilUp(s);
      expect(banner).toContain('Keys and customers: in Redis');
      expect([...banner.matchAll(/^ +\S+ +key_[0-9A-Za-z]{16} +ask_[0-9A-Za-z]{46}$/gm)]).toHaveLength(4);
      expect(s.stderr().match(/Waiting for Redis/g)).toHaveLength(1);
      process.kill(s.npm.pid!, 'SIGINT');
      await expectStoppedCleanly(s);
    } finally {
      await redis.stop();
    }
  }, 60_000);

  it('stops everything and exits 0 on SIGINT to the pid npm start gave the shell', async () => {
    const s = npmStart(await freePorts());
    await untilUp(s);
    process.kill(s.npm.pid!, 'SIGINT');
    await expectStoppedCleanly(s);
  });

  it('stops everything and exits 0 on Ctrl-C (SIGINT to the whole process group)', async () => {
    const s = npmStart(await freePorts());
    await untilUp(s);
    process.kill(-s.npm.pid!, 'SIGINT');
    await expectStoppedCleanly(s);
  });

  it('in a terminal: one readable line per log record, and Ctrl-C typed there stops the stack with exit 0', async () => {
    const script = scriptBinary();
    const ports = await freePorts();
    const tmp = mkdtempSync(join(tmpdir(), 'npm-start-test-'));
    const state = mkdtempSync(join(tmpdir(), 'npm-start-state-'));
    const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp, LOG_LEVEL: 'info' };
    for (const name of ['HOST', 'ADMIN_TOKEN', 'API_KEYS_FILE', 'MONGO_URL', 'REDIS_URL', 'PETS_URL']) delete env[name];
    env.ADMIN_TOKEN_FILE = join(state, 'admin-token');
    for (const [name, port] of Object.entries(ports)) env[name] = String(port);
    // script(1) runs npm start on a pseudo-terminal: stdout is a TTY, and \x03 on its input is Ctrl-C.
    // It runs the command through `$SHELL -c`, a non-interactive shell that (dash, unlike bash)
    // dies of the Ctrl-C itself and reports 130; `exec` leaves npm in its place, as in a terminal,
    // where the interactive shell survives Ctrl-C and shows npm's own exit code.
    const term = spawn(script, ['-qfec', 'exec npm start --ignore-scripts', '/dev/null'], { cwd: ROOT, env });
    const s: Started = {
      npm: term,
      ports,
      tmp,
      state,
      stdout: () => out,
      stderr: () => '',
      interrupt: () => term.stdin.write('\x03'),
      exited: once(term, 'exit').then(([code, signal]) => ({
        code: code as number | null,
        signal: signal as NodeJS.Signals | null,
      })),
    };
    started.push(s);
    let out = '';
    term.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    await untilUp(s);
    expect((await fetch(`http://127.0.0.1:${ports.PORT}/v1`)).status).toBe(200);
    // The request's log record arrives on its own line, pretty-printed.
    while (!/INFO.*gateway.*request.*"path":"\/v1"/.test(out)) await once(term.stdout, 'data');
    term.stdin.write('\x03');
    await expectStoppedCleanly(s);
    const lines = stripVTControlCharacters(out).split(/\r?\n/);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(lines).toContainEqual(
      expect.stringMatching(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: gateway request .*"path":"\/v1"/),
    );
  });

  it('exits 1 at once with one line naming a busy port and the variable that moves it', async () => {
    const ports = await freePorts();
    const squatter = createServer();
    squatter.listen(ports.ADMIN_PORT, '127.0.0.1');
    await once(squatter, 'listening');
    try {
      const s = npmStart(ports);
      expect((await s.exited).code).toBe(1);
      expect(ownLines(s.stderr())).toEqual([
        `npm start: port ${ports.ADMIN_PORT} (the admin API) is already in use on 127.0.0.1; set ADMIN_PORT to a free port`,
      ]);
      // Nothing was started: the other ports are still free.
      expect(await listenable(ports.PORT)).toBe(true);
      expect(await listenable(ports.PETS_PORT)).toBe(true);
      expect(leftBehind(s.tmp)).toEqual([]);
    } finally {
      squatter.close();
    }
  });

  it('reports every configuration problem of both services at once, in one format, before starting either', async () => {
    const ports = await freePorts();
    const s = npmStart(ports, [], { NODE_ENV: 'production', REDIS_URL: 'localhost:6379' });
    expect((await s.exited).code).toBe(1);
    expect(ownLines(s.stderr())).toEqual([
      'gateway: invalid configuration:',
      '  - REDIS_URL="localhost:6379" is not a URL: write redis://localhost:6379',
      '  - MONGO_URL is required when NODE_ENV=production (keys must survive restarts)',
      'pets: invalid configuration:',
      '  - MONGO_URL is required when NODE_ENV=production (the in-memory store loses every pet on restart)',
    ]);
    expect(s.stdout()).not.toContain('{');
    for (const port of Object.values(ports)) expect(await listenable(port)).toBe(true);
  });

  it('names every taken port and its variable in one message (another copy of the stack holds them all)', async () => {
    const ports = await freePorts();
    const squatters = await Promise.all(
      (['ADMIN_PORT', 'METRICS_PORT', 'PETS_METRICS_PORT'] as const).map(async (name) => {
        const squatter = createServer();
        squatter.listen(ports[name], '127.0.0.1');
        await once(squatter, 'listening');
        return squatter;
      }),
    );
    try {
      const s = npmStart(ports);
      expect((await s.exited).code).toBe(1);
      expect(ownLines(s.stderr())).toEqual([
        'npm start: 3 ports are taken; set each variable to a free port:',
        `  ADMIN_PORT=${ports.ADMIN_PORT}  in use on 127.0.0.1 (the admin API)`,
        `  METRICS_PORT=${ports.METRICS_PORT}  in use on 127.0.0.1 (the gateway's metrics)`,
        `  PETS_METRICS_PORT=${ports.PETS_METRICS_PORT}  in use on 127.0.0.1 (the pets service's metrics)`,
      ]);
      expect(await listenable(ports.PORT)).toBe(true);
      expect(await listenable(ports.PETS_PORT)).toBe(true);
    } finally {
      for (const squatter of squatters) squatter.close();
    }
  });
});
