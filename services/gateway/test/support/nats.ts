import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, MissingPrerequisite, which } from '@animal-store/tests/support/runtime.js';

/** A nats-server with JetStream that a test owns: on a free port, its store in a directory of its own. */
export class NatsProcess {
  private child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private readonly storeDir: string,
    /** A configuration file to run instead of the command-line flags. */
    private readonly configFile?: string,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<NatsProcess> {
    if (!which('nats-server')) {
      throw new MissingPrerequisite('nats-server is not on PATH: install it (apt-get install nats-server)');
    }
    const nats = new NatsProcess(await freePort(), await mkdtemp(join(tmpdir(), 'nats-')));
    await nats.restart();
    return nats;
  }

  /**
   * A nats-server on a configuration of its own: `render` is given the server's store directory
   * and must listen for clients on `port`.
   */
  static async fromConfig(port: number, render: (storeDir: string) => string): Promise<NatsProcess> {
    if (!which('nats-server')) {
      throw new MissingPrerequisite('nats-server is not on PATH: install it (apt-get install nats-server)');
    }
    const storeDir = await mkdtemp(join(tmpdir(), 'nats-'));
    const configFile = join(storeDir, 'nats.conf');
    await writeFile(configFile, render(storeDir));
    const nats = new NatsProcess(port, storeDir, configFile);
    await nats.restart();
    return nats;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null;
  }

  /** Starts (again) on the same port and store: the stream and its messages are still there. */
  async restart(): Promise<void> {
    if (this.running) throw new Error('nats-server is already running');
    const args = this.configFile
      ? ['-c', this.configFile]
      : ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.storeDir];
    const child = spawn('nats-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const seen = (chunk: Buffer) => {
        output = (output + chunk.toString()).slice(-4000);
        if (output.includes('Server is ready')) resolve();
      };
      child.stdout?.on('data', seen);
      child.stderr?.on('data', seen);
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`nats-server exited (${code}) before it was ready: ${output}`)));
    });
  }

  /** Stops the server: every region loses the link. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  }

  async remove(): Promise<void> {
    await this.stop();
    await rm(this.storeDir, { recursive: true, force: true });
  }
}
