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

  it('gives each leak its own successor when a customer has two', async () => {
    clock = Date.now();
    const gw = await gateways.start({ now });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const first = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
    const second = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'web' });
    const firstLeak = await adminPost(gw, '/admin/leaks', { key: first.key, source: 'log' });
    const secondLeak = await adminPost(gw, '/admin/leaks', { key: second.key, source: 'log' });
    const owner = await signIn(gw, customer.id as string);
    // The later report first: a lookup that took whichever leak came first would answer the other key.
    for (const [leak, key] of [
      [secondLeak, second],
      [firstLeak, first],
    ] as const) {
      const shown = await owner.send('POST', `/portal/api/leaks/${leak.id}/successor`);
      expect(shown.statusCode, shown.body).toBe(200);
      expect(shown.json().keyId).toBe(key.id);
      expect(await pets(gw, shown.json().key as string)).toBe(200);
    }
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

  it('shows a report’s url, and no successor or time left for a leak answered by notice or revocation', async () => {
    clock = Date.now();
    const gw = await gateways.start({ now, env: { LEAK_RESPONSE: 'notify', LEAK_RESPONSE_PLANS: 'free=revoke' } });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const small = await adminPost(gw, '/admin/customers', { name: 'Small', plan: 'free' });
    const told = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'told' });
    const gone = await adminPost(gw, '/admin/keys', { customerId: small.id, name: 'gone' });
    const url = 'https://github.com/acme/app/blob/main/.env';
    const notified = await adminPost(gw, '/admin/leaks', { key: told.key, source: 'scanner', url });
    const revoked = await adminPost(gw, '/admin/leaks', { key: gone.key, source: 'ticket' });
    const browser = await signIn(gw, customer.id as string);
    const items = async (b: Awaited<ReturnType<typeof signIn>>) =>
      (await b.get('/portal/api/leaks')).json().items as Record<string, unknown>[];
    expect(await items(browser)).toEqual([
      {
        id: notified.id,
        keyId: told.id,
        keyName: 'told',
        reportedAt: notified.reportedAt,
        source: 'scanner',
        url,
        response: 'notify',
      },
    ]);
    expect(await items(await signIn(gw, small.id as string))).toEqual([
      {
        id: revoked.id,
        keyId: gone.id,
        keyName: 'gone',
        reportedAt: revoked.reportedAt,
        source: 'ticket',
        response: 'revoke',
      },
    ]);
    const none = await browser.send('POST', `/portal/api/leaks/${notified.id}/successor`);
    expectError(none, 404, 'not_found');
    expect(none.json().message).toBe('No new secret to show: it was shown already, or its grace has ended');
  });

  it('counts the time left up to the next whole second, and gives no successor of a key revoked since', async () => {
    const logs: Record<string, unknown>[] = [];
    clock = Date.now();
    const gw = await gateways.start({ now, logs });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const made = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
    const reported = await adminPost(gw, '/admin/leaks', { key: made.key, source: 'log' });
    const owner = await signIn(gw, customer.id as string);
    clock += 600_400;
    const [item] = (await owner.get('/portal/api/leaks')).json().items;
    const endsAt = Date.parse(item.leakedSecretEndsAt);
    expect(item.secondsLeft).toBe(Math.ceil((endsAt - clock) / 1000));
    expect((endsAt - clock) % 1000).not.toBe(0);
    expect((await owner.send('DELETE', `/portal/api/keys/${made.id}`)).statusCode).toBe(204);
    const after = await owner.send('POST', `/portal/api/leaks/${reported.id}/successor`);
    expectError(after, 404, 'not_found');
    expect(after.json().message).toBe('No new secret to show: the key was rotated or revoked since');
    expect(logs.filter((l) => l.audit === 'leak.successor_shown')).toEqual([]);
  });

  it('audits the successor shown, with the key, the leak and the customer', async () => {
    const logs: Record<string, unknown>[] = [];
    clock = Date.now();
    const gw = await gateways.start({ now, logs });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const made = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
    const reported = await adminPost(gw, '/admin/leaks', { key: made.key, source: 'log' });
    const owner = await signIn(gw, customer.id as string);
    const shown = await owner.send('POST', `/portal/api/leaks/${reported.id}/successor`);
    expect(shown.json()).toEqual({ keyId: made.id, key: expect.stringMatching(/^ask_/) });
    expect(logs.filter((l) => l.audit === 'leak.successor_shown')).toEqual([
      expect.objectContaining({
        keyId: made.id,
        leakId: reported.id,
        actor: { customerId: customer.id },
        msg: `portal: leak.successor-shown ${made.id} by ${customer.id}`,
      }),
    ]);
  });
});
