// The baseline the gateway is measured against: fastify + @fastify/http-proxy with the gateway's
// upstream pool (proxy-options.mjs), and nothing else (no auth, no limits, no logging, no metrics).
import httpProxy from '@fastify/http-proxy';
import Fastify from 'fastify';
import { proxyOptions } from './proxy-options.mjs';

const app = Fastify({ logger: false });
await app.register(httpProxy, proxyOptions(process.env.PETS_URL));
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
