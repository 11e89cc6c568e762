import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Socket } from 'node:net';
import { containerRuntime, freePort, MissingPrerequisite, which } from './runtime.js';

/** The redis-server binary, or the one-line failure saying how to get it. */
export function redisServerBinary(): string {
  const binary = which('redis-server');
  if (!binary) {
    throw new MissingPrerequisite(
      'redis-server is not on PATH: install it (apt-get install redis-server; .ci/run does)',
    );
  }
  return binary;
}

/** The redis-cli binary (it creates a Redis Cluster), or the one-line failure saying how to get it. */
export function redisCliBinary(): string {
  const binary = which('redis-cli');
  if (!binary) {
    throw new MissingPrerequisite('redis-cli is not on PATH: install it (apt-get install redis-tools; .ci/run does)');
  }
  return binary;
}

export interface TestRedis {
  url: string;
  /** How this Redis was found: env, container or redis-server. */
  source: 'env' | 'container' | 'process';
  stop(): Promise<void>;
}

/** A throwaway Redis on loopback: no persistence, warnings only. */
export const standalone = (port: number): string[] => [
  '--port',
  String(port),
  '--bind',
  '127.0.0.1',
  '--save',
  '',
  '--appendonly',
  'no',
  '--loglevel',
  'warning',
];

/** How long a redis-server may take to answer its first PING: generous, a loaded CI host is slow. */
const READY_WITHIN_MS = 30_000;

/** One PING on a fresh connection: the first line of the answer, or why there was none. */
function ping(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (answer: string) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(1000, () => done('timed out'));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
    socket.once('data', (data) => done(data.toString().split('\r\n')[0] ?? ''));
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
  });
}

/** A Redis the test owns: a redis-server process on a free port, which it may kill and restart. */
export class RedisProcess implements TestRedis {
  readonly source = 'process' as const;
  private child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private readonly argv: (port: number) => string[],
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** `argv` replaces the default arguments (a node of a Cluster, a Sentinel). */
  static async start(port?: number, argv: (port: number) => string[] = standalone): Promise<RedisProcess> {
    const redis = new RedisProcess(port ?? (await freePort()), argv);
    await redis.restart();
    return redis;
  }

  /**
   * Starts (again) on the same port; resolves once it answers PING. Fails at once, with what the
   * process printed, if it cannot be spawned or exits first (a port taken meanwhile), and after
   * READY_WITHIN_MS of a clock if it never answers: CI once saw a fixed 200 tries of PING (about
   * 5 s) run out on a host loaded by two test projects at once, with nothing to say why.
   */
  async restart(): Promise<void> {
    const child = spawn(redisServerBinary(), this.argv(this.port), { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-2000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    let ended: Error | undefined;
    const failed = new Promise<never>((_, reject) => {
      const fail = (error: Error) => {
        ended = error;
        reject(error);
      };
      child.once('error', (error) => fail(new Error(`redis-server could not be started: ${error.message}`)));
      child.once('exit', (code, signal) =>
        fail(new Error(`redis-server on port ${this.port} exited (${signal ?? code}) before answering: ${output}`)),
      );
    });
    failed.catch(() => {});
    await Promise.race([
      failed,
      this.waitForPing(
        () => ended,
        () => output,
      ),
    ]);
  }

  private async waitForPing(ended: () => Error | undefined, output: () => string): Promise<void> {
    const deadline = Date.now() + READY_WITHIN_MS;
    let last = 'no answer yet';
    while (Date.now() < deadline && !ended()) {
      last = await ping(this.port);
      if (last === '+PONG') return;
      await new Promise((r) => setTimeout(r, 25));
    }
    const error = ended();
    if (error) throw error;
    throw new Error(
      `redis-server on port ${this.port} did not answer PING within ${READY_WITHIN_MS} ms (last: ${last}; pid ${this.child?.pid}): ${output()}`,
    );
  }

  /** SIGSTOP: its connections stay open and nothing answers, as a stalled Redis does. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  /** SIGCONT after freeze: it answers everything it was sent meanwhile, in order. */
  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  /** SIGKILL, like a crash: no clean shutdown for clients to see. */
  async kill(): Promise<void> {
    const child = this.child;
    // A process ended by a signal keeps exitCode null: check both, or a second kill waits forever.
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.kill();
  }
}

/**
 * Redis for tests: REDIS_URL if set, else a container, else a redis-server on PATH.
 * Callers namespace their keys, so a shared REDIS_URL is safe.
 */
export async function startRedis(): Promise<TestRedis> {
  if (process.env.REDIS_URL) {
    return { url: process.env.REDIS_URL, source: 'env', stop: async () => {} };
  }
  if (await containerRuntime()) {
    const { GenericContainer } = await import('testcontainers');
    const container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
    return {
      url: `redis://${container.getHost()}:${container.getMappedPort(6379)}`,
      source: 'container',
      stop: async () => {
        await container.stop();
      },
    };
  }
  return RedisProcess.start();
}
