import { hash } from 'node:crypto';
import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { describe, expect, it } from 'vitest';
import { generateApiKey } from '../../../src/keys/api-key.js';
import { auth, expectError } from '../../support/admin.js';
import { addKey, startGateway, useGateways } from '../../support/helpers.js';

const gateways = useGateways();

describe('POST /admin/leaks and GET /admin/leaks', () => {
  it('acts on a key reported by hand and lists the leak, newest first, without a secret', async () => {
    const gw = await gateways.start({ env: { LEAK_GRACE_SECONDS: '600' } });
    const { id, key } = await addKey(gw.deps, 'free');
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/leaks',
      headers: auth,
      payload: { key, source: 'support ticket 4711', url: 'https://support.example.com/t/4711' },
    });
    expect(res.statusCode).toBe(201);
    const leak = res.json();
    expect(leak).toMatchObject({ keyId: id, reporter: 'manual', response: 'rotate', source: 'support ticket 4711' });
    expect(Date.parse(leak.leakedSecretEndsAt) - Date.parse(leak.reportedAt)).toBe(600_000);
    expect((await gw.deps.keyStore.get(id))?.previous?.sha256).toBe(hash('sha256', key, 'hex'));

    const other = await addKey(gw.deps, 'pro');
    const byHash = await gw.admin.inject({
      method: 'POST',
      url: '/admin/leaks',
      headers: auth,
      payload: { sha256: hash('sha256', other.key, 'hex'), source: 'log' },
    });
    expect(byHash.statusCode).toBe(201);

    const list = await gw.admin.inject({ url: '/admin/leaks?limit=10', headers: auth });
    expect(list.statusCode).toBe(200);
    expect(list.json().items.map((l: { id: string }) => l.id)).toEqual([byHash.json().id, leak.id]);
    expect(list.body).not.toContain(key);
    expect(list.body).not.toContain(hash('sha256', key, 'hex'));
  });

  it('answers 404 for a secret no key takes, 400 for both or neither of key and sha256', async () => {
    const gw = await gateways.start();
    const unknown = await gw.admin.inject({
      method: 'POST',
      url: '/admin/leaks',
      headers: auth,
      payload: { key: generateApiKey(), source: 'log' },
    });
    expectError(unknown, 404, 'not_found');
    for (const payload of [{ source: 'log' }, { key: generateApiKey(), sha256: 'a'.repeat(64), source: 'log' }]) {
      expectError(
        await gw.admin.inject({ method: 'POST', url: '/admin/leaks', headers: auth, payload }),
        400,
        'invalid_request',
      );
    }
    expect((await gw.admin.inject({ url: '/admin/leaks', headers: auth })).json()).toEqual({ items: [] });
  });

  it('answers 503 while the store of leaks (Redis) is away', async () => {
    const redis = await RedisProcess.start();
    const gw = await startGateway({ redisUrl: redis.url, pubsub: false });
    try {
      await redis.stop();
      const res = await gw.admin.inject({ url: '/admin/leaks', headers: auth });
      expectError(res, 503, 'store_unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      await gw.close();
    }
  });
});
