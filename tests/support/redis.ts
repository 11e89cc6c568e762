import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
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

  /** Starts (again) on the same port; resolves once it accepts connections. */
  async restart(): Promise<void> {
    const binary = redisServerBinary();
    const child = spawn(binary, this.argv(this.port), { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    let output = '';
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
    });
    // With loglevel warning the ready line is not printed; poll with PING instead.
    await Promise.race([ready, this.waitForPing()]);
  }

  private async waitForPing(): Promise<void> {
    const { Socket } = await import('node:net');
    for (let attempt = 0; attempt < 200; attempt++) {
      const ok = await new Promise<boolean>((resolve) => {
        const socket = new Socket();
        socket.once('error', () => resolve(false));
        socket.connect(this.port, '127.0.0.1', () => socket.write('PING\r\n'));
        socket.once('data', (d) => {
          socket.destroy();
          resolve(d.toString().startsWith('+PONG'));
        });
      });
      if (ok) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`redis-server on port ${this.port} did not answer PING`);
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
