import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, connected, redisClient, startGateway, type TestGateway } from '../../support/helpers.js';

/**
 * A webhook endpoint's ping and its latest attempts (admin/routes/webhook-deliveries.ts) as a caller
 * meets them when the request or the queue is not as it should be. A ping delivered and the
 * attempts it leaves are webhooks/webhooks.test.ts's subject.
 */
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const open: TestGateway[] = [];
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((gw) => gw.close()));
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Loopback endpoints allowed: these tests are about the routes, not the endpoint rules. */
const LOCAL = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };

async function gateway(redisUrl: string | null): Promise<TestGateway> {
  const gw = await startGateway({ redisUrl, env: LOCAL });
  open.push(gw);
  return gw;
}

/** An id one character longer than the 64 the routes accept. */
const LONG_ID = `wh_${'x'.repeat(62)}`;

describe('what the routes’ schemas refuse', () => {
  it.each([
    ['ping', 'POST', `/admin/webhooks/${LONG_ID}/test`],
    ['deliveries', 'GET', `/admin/webhooks/${LONG_ID}/deliveries`],
  ] as const)(
    '%s: an id over 64 characters is a bad request (400), not an unknown endpoint (404)',
    async (_route, method, url) => {
      const gw = await gateway(null);
      const res = await gw.admin.inject({ method, url, headers: admin });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ code: 'invalid_request', message: expect.stringContaining('id'), status: 400 });
    },
  );
});

describe('a ping while the delivery queue cannot write', () => {
  it('answers 503 with Retry-After after 5 s, naming the queue, while the endpoint is still read', async () => {
    // Its own redis-server, paused by the test: pausing a shared REDIS_URL would stall other tests.
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.stop());
    const control = await connected(redisClient(redis.url, 2_000));
    cleanups.push(async () => {
      control.disconnect();
    });
    const gw = await gateway(redis.url);
    const made = await gw.admin.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: admin,
      payload: { url: 'http://127.0.0.1:9/hook', events: ['key.created'] },
    });
    expect(made.statusCode, made.body).toBe(201);
    const { id } = made.json() as { id: string };
    // Writes (BullMQ's scripts among them) wait; reads, such as finding the endpoint, are served.
    await control.call('CLIENT', 'PAUSE', '60000', 'WRITE');
    let ping: Awaited<ReturnType<TestGateway['admin']['inject']>>;
    try {
      ping = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/test`, headers: admin });
    } finally {
      // Before the gateway closes: BullMQ's close would wait on the paused writes.
      await control.call('CLIENT', 'UNPAUSE');
    }
    expect(ping.statusCode, ping.body).toBe(503);
    expect(ping.json()).toEqual({
      code: 'store_unavailable',
      message: 'The webhook delivery queue did not answer within 5000 ms; retry in 5 s',
      status: 503,
    });
    expect(Number(ping.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });
});
