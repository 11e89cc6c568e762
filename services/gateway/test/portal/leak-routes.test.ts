import { describe, expect, it } from 'vitest';
import { expectError } from '../support/admin.js';
import { bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';
import { adminPost, signIn } from './support.js';

/*
 * A customer's leaked key in the portal: the report, the successor and the time left in the
 * grace, and the successor secret given once; the webhook `key.leaked` that tells it to look.
 */

const gateways = useGateways();
const LOCAL = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };

let clock = Date.now();
const now = () => clock;

async function pets(gw: TestGateway, key: string) {
  return (await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode;
}

describe('a leaked key in the portal', () => {
  it('shows the leak, the successor and the time left, and gives the successor secret once', async () => {
    clock = Date.now();
    const gw = await gateways.start({ env: LOCAL, now });
    const hook = await startReceiver();
    try {
      await adminPost(gw, '/admin/webhooks', { url: hook.url, events: ['key.leaked'] });
      const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
      const made = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
      const reported = await adminPost(gw, '/admin/leaks', { key: made.key, source: 'support ticket 9' });
      await hook.until(1);
      expect(JSON.parse(hook.received[0]?.body ?? '{}')).toMatchObject({
        type: 'key.leaked',
        data: { keyId: made.id, customerId: customer.id, response: 'rotate', source: 'support ticket 9' },
      });
      expect(hook.received[0]?.body).not.toContain(made.key);

      const browser = await signIn(gw, customer.id as string);
      clock += 600_000;
      const list = await browser.get('/portal/api/leaks');
      expect(list.statusCode, list.body).toBe(200);
      expect(list.json().items).toEqual([
        expect.objectContaining({
          id: reported.id,
          keyId: made.id,
          keyName: 'ci',
          response: 'rotate',
          successorPrefix: expect.stringMatching(/^ask_/),
          secondsLeft: 3_000,
        }),
      ]);

      const successor = await browser.send('POST', `/portal/api/leaks/${reported.id}/successor`);
      expect(successor.statusCode, successor.body).toBe(200);
      const key = successor.json().key as string;
      expect(key.startsWith(list.json().items[0].successorPrefix)).toBe(true);
      expect(await pets(gw, key)).toBe(200);
      expect(await pets(gw, made.key as string)).toBe(200);
      expectError(await browser.send('POST', `/portal/api/leaks/${reported.id}/successor`), 404, 'not_found');

      // Another customer sees none of it.
      const other = await adminPost(gw, '/admin/customers', { name: 'Other', plan: 'pro' });
      const stranger = await signIn(gw, other.id as string);
      expect((await stranger.get('/portal/api/leaks')).json()).toEqual({ items: [] });

      clock += 3_000_000;
      expect(await pets(gw, made.key as string)).toBe(401);
      // The session's hour is over too: a new sign-in reads the grace as ended.
      const later = await signIn(gw, customer.id as string);
      expect((await later.get('/portal/api/leaks')).json().items[0].secondsLeft).toBe(0);
    } finally {
      await hook.close();
    }
  });

  it('gives another customer’s successor to no one but its own', async () => {
    clock = Date.now();
    const gw = await gateways.start({ now });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const made = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
    const reported = await adminPost(gw, '/admin/leaks', { key: made.key, source: 'log' });
    const other = await adminPost(gw, '/admin/customers', { name: 'Other', plan: 'pro' });
    const stranger = await signIn(gw, other.id as string);
    expectError(await stranger.send('POST', `/portal/api/leaks/${reported.id}/successor`), 404, 'not_found');
    const owner = await signIn(gw, customer.id as string);
    expect((await owner.send('POST', `/portal/api/leaks/${reported.id}/successor`)).statusCode).toBe(200);
  });

  it('gives no successor the customer has since rotated away', async () => {
    clock = Date.now();
    const gw = await gateways.start({ now });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const made = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
    const reported = await adminPost(gw, '/admin/leaks', { key: made.key, source: 'log' });
    const owner = await signIn(gw, customer.id as string);
    const rotated = await owner.send('POST', `/portal/api/keys/${made.id}/rotate`, { gracePeriodSeconds: 0 });
    expect(rotated.statusCode, rotated.body).toBe(200);
    expectError(await owner.send('POST', `/portal/api/leaks/${reported.id}/successor`), 404, 'not_found');
  });
});
