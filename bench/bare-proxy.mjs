// The baseline the gateway is measured against: fastify + @fastify/http-proxy with the same
// upstream settings, and nothing else (no auth, no limits, no logging, no metrics).
import httpProxy from '@fastify/http-proxy';
import Fastify from 'fastify';

const app = Fastify({ logger: false });
await app.register(httpProxy, {
  upstream: process.env.PETS_URL,
  prefix: '/v1',
  rewritePrefix: '/v1',
  undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 },
  replyOptions: { retryDelay: () => null },
});
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
