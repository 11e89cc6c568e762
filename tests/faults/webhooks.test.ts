import { startReceiver } from '@animal-store/gateway/test/support/webhook-receiver.js';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFailed, vi } from 'vitest';
import { RedisProcess } from '../support/redis.js';
import { freePort } from '../support/runtime.js';
import { killAllServices, ServiceProcess } from '../support/service-process.js';

/**
 * A delivery outlives the gateway process that queued it: SIGKILLed while the delivery waits for
 * its retry, the next gateway on the same Redis makes it, also when that Redis is slow to answer
 * it at start. A Redis of this file's own: one test pauses every client of it.
 */

const ADMIN_TOKEN = 'faults-webhooks-admin-token-0123';
const PREFIX = `fw${Date.now()}:`;

describe('webhook deliveries across a SIGKILL', () => {
  let redis: RedisProcess;
  let inspect: Redis;

  beforeAll(async () => {
    redis = await RedisProcess.start();
    inspect = new Redis(redis.url);
  });
  afterEach(async () => {
    await killAllServices();
    await inspect.flushall();
  });
  afterAll(async () => {
    inspect?.disconnect();
    await redis?.stop();
  });

  async function gateway(adminPort: number): Promise<ServiceProcess> {
    return ServiceProcess.start('gateway', {
      LOG_LEVEL: 'info',
      REDIS_URL: redis.url,
      REDIS_PREFIX: PREFIX,
      ADMIN_TOKEN,
      ADMIN_PORT: String(adminPort),
      PORTAL_PORT: '0',
      PETS_URL: 'http://127.0.0.1:9',
      WEBHOOKS_ALLOW_INSECURE: 'true',
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      // Long enough for the kill to land while the retry waits, on a loaded machine too (at 1.5 s a
      // CI run once saw the retry start first: the job was then active under the dead process's
      // lock, and BullMQ's stalled-job check took longer than the test's timeout to free it).
      WEBHOOKS_RETRY_BASE_MS: '5000',
      WEBHOOKS_RETRY_MAX_DELAY_MS: '5000',
    });
  }

  /**
   * Runs `restart` with a delivery pending (the receiver answered its first attempt 503 and it
   * waits in BullMQ's delayed set) and its gateway SIGKILLed; the gateway `restart` starts must
   * make it.
   */
  async function killedWithDeliveryPending(restart: () => Promise<ServiceProcess>): Promise<ServiceProcess> {
    const hook = await startReceiver([503]);
    const started: ServiceProcess[] = [];
    // On failure: what the receiver got, the queue's sets and each process's log.
    onTestFailed(async () => {
      const sets = await inspect.keys(`{${PREFIX}webhooks}:deliveries:*`);
      process.stderr.write(
        `webhook SIGKILL test: received ${JSON.stringify(hook.received.map((r) => r.status))}; keys ${sets.join(' ')}\n` +
          started.map((p, i) => `--- gateway ${i + 1}\n${p.output()}`).join('\n'),
      );
    });
    try {
      const adminPort = await freePort();
      const first = await gateway(adminPort);
      started.push(first);
      const admin = `http://127.0.0.1:${adminPort}`;
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
      // Right after start, on a loaded machine, the gateway's first Redis commands can outlast its
      // command timeout: the admin API then answers 503 store_unavailable and stores nothing, and
      // a client tries again, as this one does.
      const created = await vi.waitFor(
        async () => {
          const res = await fetch(`${admin}/admin/webhooks`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({ url: hook.url, events: ['key.created'] }),
          });
          expect(res.status).not.toBe(503);
          return res;
        },
        { timeout: 15_000, interval: 250 },
      );
      expect(created.status).toBe(201);
      const { id, secret } = (await created.json()) as { id: string; secret: string };
      // A ping answered 503 is never delivered (its fence, redis/fenced-writes.ts), so a client
      // retries it as it retries the create: one delivery, whichever call queued it.
      const ping = await vi.waitFor(
        async () => {
          const res = await fetch(`${admin}/admin/webhooks/${id}/test`, { method: 'POST', headers: auth, body: '{}' });
          expect(res.status).not.toBe(503);
          return res;
        },
        { timeout: 15_000, interval: 250 },
      );
      expect(ping.status).toBe(202);

      await hook.until(1);
      // Pending: back in BullMQ's delayed set, waiting for its retry, when the process dies.
      await vi.waitFor(async () => expect(await inspect.zcard(`{${PREFIX}webhooks}:deliveries:delayed`)).toBe(1), {
        timeout: 5_000,
        interval: 20,
      });
      await first.kill();
      expect(hook.received).toHaveLength(1);
      // Still waiting for its retry, not taken by the dead process: what these tests are about.
      expect(await inspect.zcard(`{${PREFIX}webhooks}:deliveries:delayed`)).toBe(1);

      const next = await restart();
      started.push(next);
      await hook.until(2);
      const [refused, delivered] = hook.received as [(typeof hook.received)[0], (typeof hook.received)[0]];
      expect([refused.status, delivered.status]).toEqual([503, 200]);
      expect(delivered.headers['webhook-id']).toBe(refused.headers['webhook-id']);
      expect(new Webhook(secret).verify(delivered.body, delivered.headers as Record<string, string>)).toMatchObject({
        type: 'webhook.test',
        data: { webhookId: id },
      });
      return next;
    } finally {
      await hook.close();
    }
  }

  // Two gateway processes start in turn: slow on a loaded machine.
  it('is delivered after a restart when the gateway was killed with it pending', async () => {
    await killedWithDeliveryPending(async () => gateway(await freePort()));
  }, 60_000);

  it('is delivered by a restarted gateway whose Redis answered nothing at start', async () => {
    const next = await killedWithDeliveryPending(async () => {
      // Redis answers nothing, the connection's ready check neither, until the new gateway's first
      // look for endpoints has failed ('Stream isn't writeable'), as it does when Redis is slow to
      // accept it. Only its retry, not the next expiry round (WEBHOOKS_EXPIRY_SCAN_SECONDS, 5 min),
      // can then start its deliveries. Held until that failure is seen, not for a fixed time: a
      // 3 s CLIENT PAUSE once ended before a gateway started on a loaded host was first heard from.
      redis.freeze();
      try {
        const started = await gateway(await freePort());
        await vi.waitFor(() => expect(started.messages('webhooks: expiry scan failed').length).toBeGreaterThan(0), {
          timeout: 20_000,
          interval: 50,
        });
        return started;
      } finally {
        redis.thaw();
      }
    });
    // The start-up race did happen: the delivery came from the retry.
    expect(next.messages('webhooks: expiry scan failed').length).toBeGreaterThan(0);
  }, 60_000);
});
