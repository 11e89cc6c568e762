import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';

/*
 * Key events of a customer's keys name the customer: a receiver that mails or bills the
 * customer gets its id in the event, on the events the admin API sends and on those a request sends.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);
const LOCAL = {
  WEBHOOKS_ALLOW_INSECURE: 'true',
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  BAN_THRESHOLD: '1',
  BAN_GRACE_MS: '0',
};

function call(gw: TestGateway, method: string, url: string, payload?: object): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ method: method as 'GET', url, headers: admin, ...(payload ? { payload } : {}) });
}

async function made(res: Promise<LightMyRequestResponse>): Promise<Record<string, string>> {
  const answer = await res;
  expect(answer.statusCode, answer.body).toBeLessThan(300);
  return answer.body === '' ? {} : answer.json();
}

describe('key events of a customer’s key', () => {
  it('carry the customerId on created, updated, banned and revoked; a key of no customer has none', async () => {
    const gw = await gateways.start({ env: LOCAL });
    const hook = await startReceiver();
    try {
      await made(
        call(gw, 'POST', '/admin/webhooks', {
          url: hook.url,
          events: ['key.created', 'key.updated', 'key.banned', 'key.revoked'],
        }),
      );
      const customer = await made(call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'free' }));
      const key = await made(call(gw, 'POST', '/admin/keys', { customerId: customer.id, name: 'ci' }));
      await hook.until(1);
      await made(call(gw, 'PATCH', `/admin/keys/${key.id}`, { name: 'ci-2' }));
      await hook.until(2);
      // A ban, from the gate: the free plan's minute is 60, BAN_THRESHOLD 1 bans on the second refusal.
      let banned = false;
      for (let i = 0; i < 70 && !banned; i++) {
        const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
        banned = res.statusCode === 429 && res.json().code === 'api_key_banned';
      }
      await hook.until(3);
      await made(call(gw, 'DELETE', `/admin/keys/${key.id}`));
      await hook.until(4);
      const alone = await made(call(gw, 'POST', '/admin/keys', { plan: 'free', name: 'alone' }));
      await hook.until(5);
      const events = hook.events();
      expect(events.map((e) => e.type)).toEqual([
        'key.created',
        'key.updated',
        'key.banned',
        'key.revoked',
        'key.created',
      ]);
      for (const event of events.slice(0, 4)) {
        expect(event.data).toMatchObject({ keyId: key.id, customerId: customer.id, plan: 'free' });
      }
      expect(events[4]?.data).toEqual({ keyId: alone.id, plan: 'free', name: 'alone' });
    } finally {
      await hook.close();
    }
  });
});
