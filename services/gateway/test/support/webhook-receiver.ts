import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The status this request was answered with. */
  status: number;
}

/**
 * A webhook endpoint on loopback (node:http): records every request and answers each with the
 * next status of `script`, then 200. Tests wait on what arrives, never on time.
 */
export async function startReceiver(script: number[] = [], options: { keepAliveMs?: number } = {}) {
  const received: Received[] = [];
  const arrivals = new EventEmitter();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      const status = script.shift() ?? 200;
      received.push({ headers: req.headers, body, status });
      res.writeHead(status).end();
      arrivals.emit('request');
    });
  });
  // How long an idle connection is kept, and the hint a client's pool keeps it by (node's default 5 s).
  if (options.keepAliveMs !== undefined) server.keepAliveTimeout = options.keepAliveMs;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return {
    url,
    received,
    /** The parsed bodies of the requests answered with `status` (default 2xx). */
    events(status?: number) {
      return received
        .filter((r) => (status === undefined ? r.status < 300 : r.status === status))
        .map((r) => JSON.parse(r.body) as { type: string; timestamp: string; data: Record<string, unknown> });
    },
    /** Resolves once `count` requests have arrived in all. */
    async until(count: number): Promise<void> {
      while (received.length < count) await once(arrivals, 'request');
    },
    /** How many connections from senders are open now. */
    connections(): Promise<number> {
      return new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
