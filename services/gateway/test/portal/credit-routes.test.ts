import { describe, expect, it } from 'vitest';
import { expectError } from '../support/admin.js';
import { bearer, useGateways } from '../support/helpers.js';
import { admin, adminPost, signIn } from './support.js';

/*
 * A customer's credits in the portal: the balance and next refill with its usage, as the admin API
 * reads them; its ledger paged newest first, the admin API's entries; nothing of either for a
 * customer without credit terms.
 */

const gateways = useGateways();

describe('a customer’s credits in the portal', () => {
  it('shows the balance the admin API reads and pages the ledger newest first', async () => {
    const gw = await gateways.start();
    const credits = { refill: { amount: 50, every: 'day' } };
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro', credits });
    const key = await adminPost(gw, '/admin/keys', { customerId: customer.id });
    for (let i = 0; i < 4; i++) {
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) })).statusCode).toBe(200);
    }
    await adminPost(gw, `/admin/customers/${customer.id}/credits`, { amount: 30, reason: 'order 1234' });
    await adminPost(gw, `/admin/customers/${customer.id}/credits`, { amount: 5, reason: 'welcome', type: 'grant' });
    const browser = await signIn(gw, customer.id as string);

    const usage = await browser.get('/portal/api/usage');
    expect(usage.statusCode, usage.body).toBe(200);
    const read = (await gw.admin.inject({ url: `/admin/customers/${customer.id}/credits`, headers: admin })).json();
    expect(read.balance).toBe(50 - 4 + 30 + 5);
    expect(usage.json().credits).toEqual({
      balance: read.balance,
      openHour: read.openHour,
      nextRefillAt: read.nextRefillAt,
      refill: credits.refill,
    });

    const first = await browser.get('/portal/api/credits/ledger?limit=2');
    expect(first.statusCode, first.body).toBe(200);
    const page = first.json();
    expect(page.balance).toBe(read.balance);
    expect(page.items.map((e: { type: string; amount: number }) => [e.type, e.amount])).toEqual([
      ['grant', 5],
      ['topup', 30],
    ]);
    expect(page.items[1]).toMatchObject({ reason: 'order 1234' });
    const rest = (await browser.get(`/portal/api/credits/ledger?limit=2&after=${page.next}`)).json();
    expect(rest.items.map((e: { type: string }) => e.type)).toEqual(['refill']);
    expect(rest.next).toBeNull();
    const adminLedger = await gw.admin.inject({
      url: `/admin/customers/${customer.id}/credits/ledger`,
      headers: admin,
    });
    expect([...page.items, ...rest.items]).toEqual(adminLedger.json().items);

    expectError(await browser.get('/portal/api/credits/ledger?after=bogus'), 400, 'invalid_request');
    expectError(await browser.get('/portal/api/credits/ledger?limit=500'), 400, 'invalid_request');
    // Read-only: the portal offers no way to change a balance.
    expect((await browser.send('POST', '/portal/api/credits/ledger', { amount: 10 })).statusCode).toBe(405);
    expect((await browser.send('POST', '/portal/api/credits', { amount: 10 })).statusCode).toBe(404);
    const after = (await gw.admin.inject({ url: `/admin/customers/${customer.id}/credits`, headers: admin })).json();
    expect(after.balance).toBe(read.balance);
  });

  it('has nothing for a customer without credit terms', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Plain', plan: 'pro' });
    const browser = await signIn(gw, customer.id as string);
    const usage = await browser.get('/portal/api/usage');
    expect(usage.statusCode, usage.body).toBe(200);
    expect(usage.json()).not.toHaveProperty('credits');
    expectError(await browser.get('/portal/api/credits/ledger'), 404, 'not_found');
  });
});
