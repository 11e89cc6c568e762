import { once } from 'node:events';
import { Socket } from 'node:net';

/**
 * One plain connection to a Redis for asking INFO, kept open so that inspecting a Redis adds
 * exactly one to its `total_connections_received` however often a test polls.
 */
export class RedisInspector {
  private buffer = Buffer.alloc(0);
  private waiting: (() => void) | null = null;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.waiting?.();
    });
    socket.on('error', () => {});
  }

  static async connect(port: number, host = '127.0.0.1'): Promise<RedisInspector> {
    const socket = new Socket();
    socket.connect(port, host);
    await once(socket, 'connect');
    return new RedisInspector(socket);
  }

  /** `INFO <section>` as key/value pairs (e.g. total_connections_received, cmdstat_evalsha, process_id). */
  async info(section: string): Promise<Record<string, string>> {
    this.buffer = Buffer.alloc(0);
    this.socket.write(`INFO ${section}\r\n`);
    const text = await this.bulkReply();
    const out: Record<string, string> = {};
    for (const line of text.split('\r\n')) {
      const at = line.indexOf(':');
      if (at > 0 && !line.startsWith('#')) out[line.slice(0, at)] = line.slice(at + 1);
    }
    return out;
  }

  /** Calls of one command since this Redis started, from INFO commandstats (0 when never called). */
  async commandCalls(command: string): Promise<number> {
    const stat = (await this.info('commandstats'))[`cmdstat_${command}`];
    return Number(/calls=(\d+)/.exec(stat ?? '')?.[1] ?? 0);
  }

  close(): void {
    this.socket.destroy();
  }

  private async bulkReply(): Promise<string> {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const headerEnd = this.buffer.indexOf('\r\n');
      if (headerEnd > 0) {
        const header = this.buffer.subarray(0, headerEnd).toString();
        if (header.startsWith('-')) throw new Error(`redis: ${header.slice(1)}`);
        if (!header.startsWith('$')) throw new Error(`unexpected redis reply ${header}`);
        const length = Number(header.slice(1));
        if (this.buffer.length >= headerEnd + 2 + length + 2) {
          return this.buffer.subarray(headerEnd + 2, headerEnd + 2 + length).toString();
        }
      }
      if (this.socket.destroyed) throw new Error('redis inspector connection closed');
      if (Date.now() > deadline) throw new Error('redis did not answer INFO within 5 s');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 100);
        this.waiting = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.waiting = null;
    }
  }
}
