import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ADMIN_TOKEN, connected, redisClient, startGateway } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';

/**
 * Webhooks over a gateway's life (lifecycle.ts, Webhooks.close): what a gateway that closes leaves
 * behind, as the Redis server and a receiver see it.
 */
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('a gateway that delivered webhooks, closing', () => {
  it('ends the delivery queue’s Redis connections and its connections to receivers', async () => {
    // Its own redis-server: the test counts every client connected to it.
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.stop());
    const control = await connected(redisClient(redis.url, 2_000));
    cleanups.push(async () => {
      control.disconnect();
    });
    const clients = async () =>
      String(await control.call('CLIENT', 'LIST'))
        .trim()
        .split('\n').length;
    // Idle connections kept a minute, and the sender's pool told so: only a close ends them sooner.
    const hook = await startReceiver([], { keepAliveMs: 60_000 });
    cleanups.push(() => hook.close());

    const gw = await startGateway({
      redisUrl: redis.url,
      env: { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' },
    });
    let open = true;
    cleanups.push(async () => {
      if (open) await gw.close();
    });
    await gw.listen();
    const made = await gw.admin.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: admin,
      payload: { url: hook.url, events: ['key.created'] },
    });
    expect(made.statusCode, made.body).toBe(201);
    const ping = await gw.admin.inject({
      method: 'POST',
      url: `/admin/webhooks/${(made.json() as { id: string }).id}/test`,
      headers: admin,
    });
    expect(ping.statusCode, ping.body).toBe(202);
    await hook.until(1);
    // The gateway's own connections and the queue's (BullMQ: its queue, its worker and that one's
    // blocking connection) besides the test's; the sender's connection kept alive.
    expect(await clients()).toBeGreaterThan(3);
    expect(await hook.connections()).toBe(1);

    await gw.close();
    open = false;
    await vi.waitFor(
      async () => {
        expect(await clients()).toBe(1);
        expect(await hook.connections()).toBe(0);
      },
      { timeout: 5_000, interval: 20 },
    );
  });
});
