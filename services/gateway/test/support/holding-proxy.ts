import type { AddressInfo } from 'node:net';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a Redis that can hold either way of the traffic: the commands on their
 * way to Redis (they reach it late, as in a stall before Redis read them) or the replies on their
 * way back (Redis ran the command, its answer is late). What is held goes on, in order, at release.
 */
export interface HoldingProxy {
  url: string;
  hold(way: 'requests' | 'replies'): void;
  release(): void;
  close(): Promise<void>;
}

export async function holdingProxy(redisUrl: string): Promise<HoldingProxy> {
  const target = new URL(redisUrl);
  const held = { requests: false, replies: false };
  const waiting = { requests: [] as Array<() => void>, replies: [] as Array<() => void> };
  const sockets = new Set<Socket>();
  const forward = (way: 'requests' | 'replies', to: Socket) => (chunk: Buffer) => {
    if (held[way]) waiting[way].push(() => to.write(chunk));
    else to.write(chunk);
  };
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', forward('requests', upstream));
    upstream.on('data', forward('replies', client));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    hold(way) {
      held[way] = true;
    },
    release() {
      held.requests = false;
      held.replies = false;
      for (const send of [...waiting.requests.splice(0), ...waiting.replies.splice(0)]) send();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
