import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { constants } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from './runtime.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The built entry points (`npm test` and `npx tsc -b` build them). */
export const SERVERS = {
  gateway: join(ROOT, 'services/gateway/dist/server.js'),
  pets: join(ROOT, 'services/pets/dist/server.js'),
} as const;
const KEYS_CLI = join(ROOT, 'services/gateway/dist/cli/main.js');

export interface LogLine {
  /** When the test process read the line. */
  at: number;
  raw: string;
  /** The pino record, or null for a line that is not JSON (stderr text, close-with-grace). */
  json: Record<string, unknown> | null;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

/** Every child this module started and that has not exited yet; killed when the test process exits. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function track(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last resort when a test run is cut short: no service outlives the worker that started it.
  const killAll = () => {
    for (const c of running) c.kill('SIGKILL');
  };
  process.once('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      killAll();
      // Listening at all cancels the default action (exit); keep it when nobody else handles the signal.
      if (process.listenerCount(signal) === 1) process.exit(128 + constants.signals[signal]);
    });
  }
}

function collectLines(child: ChildProcess, into: LogLine[]): void {
  for (const stream of [child.stdout, child.stderr]) {
    let pending = '';
    stream?.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const raw of lines) {
        if (raw === '') continue;
        let json: Record<string, unknown> | null = null;
        try {
          const parsed = JSON.parse(raw);
          if (parsed && typeof parsed === 'object') json = parsed as Record<string, unknown>;
        } catch {
          // Not a pino line; kept raw.
        }
        into.push({ at: Date.now(), raw, json });
      }
    });
  }
}

function baseEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  // Nothing inherited but PATH: a REDIS_URL or MONGO_URL of the test run must not leak into a service.
  return {
    PATH: process.env.PATH ?? '',
    ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
    ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    // Any free port unless a test picks one: several services of one name run side by side.
    METRICS_PORT: '0',
    // The gateway's portal listener (on with the admin API): likewise.
    PORTAL_PORT: '0',
    // No shedding by event-loop delay, as in the in-process suites (test/support/helpers.ts): on a
    // loaded host the delay measures the machine, and a replica answered 503 overloaded in a test
    // of key events. tests/faults/overload.test.ts sets its own.
    OVERLOAD_EVENT_LOOP_DELAY_MS: '0',
    ...env,
  };
}

/**
 * A service (`node services/<name>/dist/server.js`) as its own process, as it runs in production:
 * its logs captured line by line, its exit observable, killable by signal.
 */
export class ServiceProcess {
  readonly logs: LogLine[] = [];
  readonly exited: Promise<Exit>;
  private exit: Exit | null = null;

  private constructor(
    readonly name: keyof typeof SERVERS,
    readonly child: ChildProcess,
    readonly port: number,
    /** The metrics listener's port (METRICS_PORT): GET /metrics is served there only. */
    readonly metricsPort: number,
  ) {
    collectLines(child, this.logs);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = { code, signal, at: Date.now() };
        resolve(this.exit);
      });
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get metricsUrl(): string {
    return `http://127.0.0.1:${this.metricsPort}`;
  }

  get alive(): boolean {
    return this.exit === null;
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.name} has no pid`);
    return this.child.pid;
  }

  /**
   * Starts the service on a free port (unless env has PORT) and resolves once it is up: by default
   * when it logs that it listens (LOG_LEVEL info), or with `ready: '/readyz'` when that path
   * answers 200 (any log level). Fails at once, with the output, if the process dies first.
   */
  static async start(
    name: keyof typeof SERVERS,
    env: Record<string, string> = {},
    options: { ready?: '/readyz'; timeoutMs?: number } = {},
  ): Promise<ServiceProcess> {
    // A port found free can still be taken before the child binds it (another test drawing the
    // same one: freePort): when the ports were chosen here, a start that lost that race tries new ones.
    const attempts = env.PORT === undefined && env.METRICS_PORT === undefined ? 3 : 1;
    for (let attempt = 1; ; attempt++) {
      try {
        return await ServiceProcess.startOnce(name, env, options);
      } catch (err) {
        if (attempt >= attempts || !String(err).includes('EADDRINUSE')) throw err;
      }
    }
  }

  private static async startOnce(
    name: keyof typeof SERVERS,
    env: Record<string, string>,
    options: { ready?: '/readyz'; timeoutMs?: number },
  ): Promise<ServiceProcess> {
    const port = env.PORT ? Number(env.PORT) : await freePort();
    const metricsPort = env.METRICS_PORT ? Number(env.METRICS_PORT) : await freePort();
    const child = spawn(process.execPath, [SERVERS[name]], {
      env: baseEnv({ ...env, PORT: String(port), METRICS_PORT: String(metricsPort) }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(child);
    const service = new ServiceProcess(name, child, port, metricsPort);
    const timeoutMs = options.timeoutMs ?? 20_000;
    try {
      if (options.ready) await service.pollReady(options.ready, timeoutMs);
      else await service.waitListening(timeoutMs);
    } catch (err) {
      await service.kill();
      throw err;
    }
    return service;
  }

  private async waitListening(timeoutMs: number): Promise<void> {
    // The metrics listener's line, not the API's: serve() binds the listeners in turn and the
    // metrics one last, so the API's line comes before an admin port found taken stops the
    // process (CI: a gateway taken for started, then gone, and a test waiting 60 s on it).
    const last = this.metricsPort || this.port;
    const listening = `Server listening at http://127.0.0.1:${last}`;
    const deadline = Date.now() + timeoutMs;
    while (!this.logs.some((l) => l.json?.msg === listening)) {
      if (!this.alive) throw new Error(`${this.name} exited before listening:\n${this.output()}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not listen on ${last} in time:\n${this.output()}`);
      await Promise.race([
        once(this.child.stdout ?? this.child, 'data'),
        this.exited,
        new Promise((r) => setTimeout(r, 250).unref()),
      ]);
    }
  }

  private async pollReady(path: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      if (!this.alive) throw new Error(`${this.name} exited before ${path} was ready:\n${this.output()}`);
      try {
        const response = await fetch(`${this.url}${path}`, { signal: AbortSignal.timeout(2_000) });
        last = `${response.status} ${await response.text()}`;
        if (response.status === 200) return;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      await Promise.race([this.exited, new Promise((r) => setTimeout(r, 50))]);
    }
    throw new Error(`${this.name} was not ready at ${path} in time (last: ${last}):\n${this.output()}`);
  }

  /** Log records whose message contains `text`, optionally only those read at or after index `from`. */
  messages(text: string, from = 0): LogLine[] {
    return this.logs.slice(from).filter((l) => typeof l.json?.msg === 'string' && l.json.msg.includes(text));
  }

  output(): string {
    return this.logs.map((l) => l.raw).join('\n');
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** SIGTERM (graceful shutdown), then SIGKILL if it is still there after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (!this.alive) return;
    this.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), graceMs);
    });
    const outcome = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (outcome === 'late') await this.kill();
  }

  /** SIGKILL unless it already exited; resolves once it has. */
  async kill(): Promise<void> {
    if (!this.alive) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** Kills every service process still running (afterEach/afterAll, whatever the tests did). */
export async function killAllServices(): Promise<void> {
  await Promise.all(
    [...running].map(async (child) => {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }),
  );
}

/**
 * Runs a service that is expected to exit on its own, with a hard bound; reports how it ended.
 * `node`: the Node.js to run it on (the one running the tests by default).
 */
export async function runToExit(
  name: keyof typeof SERVERS,
  env: Record<string, string>,
  boundMs: number,
  node = process.execPath,
): Promise<Exit & { elapsedMs: number; logs: LogLine[]; killedByBound: boolean }> {
  const started = Date.now();
  const child = spawn(node, [SERVERS[name]], { env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  const logs: LogLine[] = [];
  collectLines(child, logs);
  let killedByBound = false;
  const timer = setTimeout(() => {
    killedByBound = true;
    child.kill('SIGKILL');
  }, boundMs);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  // Let the pipes drain: the last log line may arrive after 'exit'.
  await Promise.all([child.stdout, child.stderr].map((s) => (s && !s.readableEnded ? once(s, 'end') : null)));
  return { code, signal, at: Date.now(), elapsedMs: Date.now() - started, logs, killedByBound };
}

/**
 * `npm run migrate` for one MongoDB, as a deployment runs it before the services (they refuse to
 * start without their indexes): each service's `server.js migrate`, which must exit 0.
 */
export async function migrateMongo(
  mongoUrl: string,
  services: ReadonlyArray<keyof typeof SERVERS> = ['pets', 'gateway'],
) {
  for (const name of services) {
    const result = await promisify(execFile)(process.execPath, [SERVERS[name], 'migrate'], {
      env: { PATH: process.env.PATH ?? '', MONGO_URL: mongoUrl },
    }).catch((err: { stderr?: string }) => {
      throw new Error(`${name} migrate failed: ${err.stderr ?? String(err)}`);
    });
    if (!result.stdout.includes(`${name} migrate: done`)) throw new Error(`${name} migrate: ${result.stdout}`);
  }
}

/** Creates an API key with the keys CLI into an API_KEYS_FILE (hash only), returning the plaintext key. */
export async function createKeyInFile(
  file: string,
  plan = 'enterprise',
  limits: { perMinute: number; perDay: number } | null = { perMinute: 100_000, perDay: 1_000_000 },
): Promise<{ id: string; key: string }> {
  const args = [KEYS_CLI, 'create', '--plan', plan, '--file', file, '--json'];
  if (limits) args.push('--per-minute', String(limits.perMinute), '--per-day', String(limits.perDay));
  const { stdout } = await promisify(execFile)(process.execPath, args, { env: { PATH: process.env.PATH ?? '' } });
  const created = JSON.parse(stdout) as { id: string; key: string };
  return { id: created.id, key: created.key };
}

/** The sum of a Prometheus counter's series whose labels include `labels`. */
export function metricValue(exposition: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = new Map<string, string>();
    for (const pair of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
      present.set(pair[1] ?? '', pair[2] ?? '');
    if (Object.entries(labels).every(([k, v]) => present.get(k) === v)) total += Number(match[3]);
  }
  return total;
}
