import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '../../support/helpers.js';

/**
 * The webhook endpoints' admin routes (admin/routes/webhooks.ts) as a caller meets them: what their
 * schemas refuse and in which shape, and what a create that failed leaves. Deliveries are
 * webhooks/webhooks.test.ts's subject, a ping and the attempts webhook-deliveries.test.ts's.
 */
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const open: TestGateway[] = [];
const redises: RedisProcess[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((gw) => gw.close()));
  await Promise.all(redises.splice(0).map((r) => r.stop()));
});

/** Loopback endpoints allowed: these tests are about the routes, not the endpoint rules. */
const LOCAL = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };

async function memoryGateway(): Promise<TestGateway> {
  const gw = await startGateway({ redisUrl: null, env: LOCAL });
  open.push(gw);
  return gw;
}

async function created(gw: TestGateway): Promise<string> {
  const res = await gw.admin.inject({
    method: 'POST',
    url: '/admin/webhooks',
    headers: admin,
    payload: { url: 'http://127.0.0.1:9/hook', events: ['key.created'] },
  });
  expect(res.statusCode, res.body).toBe(201);
  return (res.json() as { id: string }).id;
}

/** An id one character longer than the 64 the routes accept. */
const LONG_ID = `wh_${'x'.repeat(62)}`;

describe('what the routes’ schemas refuse', () => {
  const routes: Array<[string, 'GET' | 'POST' | 'PATCH' | 'DELETE', string, object | undefined]> = [
    ['show', 'GET', `/admin/webhooks/${LONG_ID}`, undefined],
    ['update', 'PATCH', `/admin/webhooks/${LONG_ID}`, { description: 'x' }],
    ['delete', 'DELETE', `/admin/webhooks/${LONG_ID}`, undefined],
    ['rotate', 'POST', `/admin/webhooks/${LONG_ID}/rotate`, undefined],
  ];
  it.each(routes)(
    '%s: an id over 64 characters is a bad request (400), not an unknown endpoint (404)',
    async (_route, method, url, payload) => {
      const gw = await memoryGateway();
      const res = await gw.admin.inject({ method, url, headers: admin, ...(payload ? { payload } : {}) });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ code: 'invalid_request', message: expect.stringContaining('id'), status: 400 });
    },
  );

  const bodies: Array<[string, 'POST' | 'PATCH', object]> = [
    ['create with an unknown event', 'POST', { url: 'http://127.0.0.1:9/hook', events: ['key.exploded'] }],
    [
      'create with the same event twice',
      'POST',
      { url: 'http://127.0.0.1:9/hook', events: ['key.created', 'key.created'] },
    ],
    ['create with no events', 'POST', { url: 'http://127.0.0.1:9/hook', events: [] }],
    [
      'create with a description of 201 characters',
      'POST',
      { url: 'http://127.0.0.1:9/hook', events: ['key.created'], description: 'd'.repeat(201) },
    ],
    ['update with no field', 'PATCH', {}],
    ['update with an unknown event', 'PATCH', { events: ['key.exploded'] }],
    ['update with a control character in the description', 'PATCH', { description: 'a\u0007b' }],
  ];
  it.each(bodies)('%s: 400 in the Error shape, and nothing is stored', async (_case, method, payload) => {
    const gw = await memoryGateway();
    const id = method === 'PATCH' ? await created(gw) : undefined;
    const before = (await gw.admin.inject({ url: '/admin/webhooks', headers: admin })).json();
    const res = await gw.admin.inject({
      method,
      url: id ? `/admin/webhooks/${id}` : '/admin/webhooks',
      headers: admin,
      payload,
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ code: 'invalid_request', message: expect.any(String), status: 400 });
    expect((await gw.admin.inject({ url: '/admin/webhooks', headers: admin })).json()).toEqual(before);
  });
});

describe('a create whose write to Redis times out', () => {
  it('answers 503 and leaves no endpoint once Redis answers again: the write that was late is taken back', async () => {
    // Its own redis-server, frozen by the test: a shared REDIS_URL cannot be.
    const redis = await RedisProcess.start();
    redises.push(redis);
    const gw = await startGateway({ redisUrl: redis.url, env: { ...LOCAL, REDIS_COMMAND_TIMEOUT_MS: '250' } });
    open.push(gw);
    // Redis is up, but one command may outlast 250 ms on a loaded host (a 503, as it should be):
    // the list is read again until it answers, as a client would.
    await vi.waitFor(
      async () => expect((await gw.admin.inject({ url: '/admin/webhooks', headers: admin })).json()).toEqual([]),
      { timeout: 10_000, interval: 50 },
    );
    redis.freeze();
    let answer: Awaited<ReturnType<TestGateway['admin']['inject']>>;
    try {
      answer = await gw.admin.inject({
        method: 'POST',
        url: '/admin/webhooks',
        headers: admin,
        payload: { url: 'http://127.0.0.1:9/hook', events: ['key.created'] },
      });
    } finally {
      redis.thaw();
    }
    expect(answer.statusCode, answer.body).toBe(503);
    expect(answer.json()).toMatchObject({ code: 'store_unavailable', status: 503 });
    // Redis works off what queued while it was stopped, the late write then its removal, in order.
    const listed = await vi.waitFor(
      async () => {
        const res = await gw.admin.inject({ url: '/admin/webhooks', headers: admin });
        expect(res.statusCode).toBe(200);
        return res.json();
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(listed).toEqual([]);
  });
});
