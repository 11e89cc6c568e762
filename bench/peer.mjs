// The stack a Node team writes in an afternoon, as the gateway's peer in `npm run bench`: fastify +
// @fastify/http-proxy + @fastify/rate-limit on Redis, one 60 s window per key, keys from a
// bearer-key map. It checks one window and bans nobody; fastify's default (no) logging.
import { readFileSync } from 'node:fs';
import httpProxy from '@fastify/http-proxy';
import rateLimit from '@fastify/rate-limit';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { proxyOptions } from './proxy-options.mjs';

/** PEER_KEYS: JSON [[key, perMinute], …]; or PEER_KEYS_FILE, a file of that JSON (too many for the environment). */
const peerKeys = process.env.PEER_KEYS_FILE ? readFileSync(process.env.PEER_KEYS_FILE, 'utf8') : process.env.PEER_KEYS;
const perMinuteByKey = new Map(JSON.parse(peerKeys ?? '[]'));
const redis = new Redis(process.env.REDIS_URL, { enableAutoPipelining: true });

const app = Fastify({ logger: false });
app.decorateRequest('perMinute', 0);
app.addHook('onRequest', async (request, reply) => {
  const key = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
  const perMinute = key && perMinuteByKey.get(key);
  if (!perMinute) return reply.code(401).send({ code: 'invalid_api_key', message: 'invalid key', status: 401 });
  request.perMinute = perMinute;
});
await app.register(rateLimit, {
  redis,
  timeWindow: 60_000,
  max: (request) => request.perMinute,
  keyGenerator: (request) => request.headers.authorization,
});
await app.register(httpProxy, proxyOptions(process.env.PETS_URL));
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.on('SIGTERM', () => app.close().then(() => redis.quit().finally(() => process.exit(0))));
