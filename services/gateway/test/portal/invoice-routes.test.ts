import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectError } from '../support/admin.js';
import { bearer, useGateways } from '../support/helpers.js';
import { admin, adminPost, signIn } from './support.js';

/*
 * A customer's invoice preview in the portal: the admin API's preview of the same customer and
 * period, JSON and CSV; a plan without a price said as such; another customer's id refused as an
 * unknown one is, with an audit line.
 */

const gateways = useGateways();

function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'portal-invoice-')), 'plans.json');
  const price = { currency: 'EUR', base: 4900, includedUnits: 10, unitPrice: 50, per: 4 };
  const plans = { metered: { windows: { minute: 1000 }, price }, unpriced: { windows: { minute: 1000 } } };
  writeFileSync(path, JSON.stringify({ plans }));
  return path;
}

describe('a customer’s invoice preview in the portal', () => {
  it('is the admin API’s preview of the signed-in customer, as JSON and CSV', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: { PLANS_FILE: plansFile() }, logs });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'metered', credits: {} });
    await adminPost(gw, `/admin/customers/${customer.id}/credits`, { amount: 100, reason: 'order 1' });
    const key = await adminPost(gw, '/admin/keys', { customerId: customer.id });
    for (let i = 0; i < 13; i++) {
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) })).statusCode).toBe(200);
    }
    const browser = await signIn(gw, customer.id as string);
    const mine = await browser.get('/portal/api/invoice-preview');
    expect(mine.statusCode, mine.body).toBe(200);
    const adminPath = `/admin/customers/${customer.id}/invoice-preview`;
    const theirs = await gw.admin.inject({ url: adminPath, headers: admin });
    expect(mine.json()).toEqual(theirs.json());
    // Every unit paid by a credit: the base fee alone, nothing billed again as overage.
    expect(mine.json()).toMatchObject({ units: 13, creditsUsed: 13, total: 4900, currency: 'EUR' });
    // Its own id named is its own preview.
    expect((await browser.get(`/portal/api/invoice-preview?customerId=${customer.id}`)).json()).toEqual(theirs.json());

    const csv = await browser.get('/portal/api/invoice-preview?period=current&format=csv');
    const adminCsv = await gw.admin.inject({ url: `${adminPath}?format=csv`, headers: admin });
    expect(csv.statusCode).toBe(200);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(csv.headers['content-disposition']).toBe(adminCsv.headers['content-disposition']);
    expect(csv.body).toBe(adminCsv.body);
    expect(csv.body).toContain('\r\ntotal,Total,,,,,4900,EUR\r\n');

    expectError(await browser.get('/portal/api/invoice-preview?period=next'), 400, 'invalid_request');
    // Not signed in: nothing.
    expect((await gw.portal.inject({ url: '/portal/api/invoice-preview' })).statusCode).toBe(401);
    expect(logs.filter((l) => l.audit === 'portal.refused')).toEqual([]);
  });

  it('says a plan without a price has nothing to preview, and refuses another customer’s id with an audit line', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: { PLANS_FILE: plansFile() }, logs });
    const alpha = await adminPost(gw, '/admin/customers', { name: 'Alpha', plan: 'metered' });
    const beta = await adminPost(gw, '/admin/customers', { name: 'Beta', plan: 'unpriced' });
    const b = await signIn(gw, beta.id as string);
    const unpriced = await b.get('/portal/api/invoice-preview');
    expectError(unpriced, 404, 'not_found');
    expect(unpriced.json().message).toBe('Your plan (unpriced) has no price: there is no invoice to preview');

    // Alpha's id in Beta's query, JSON or CSV, and a guessed one: the same 404, Alpha's preview never.
    for (const named of [alpha.id, `${alpha.id}&format=csv`, 'cus_guessed00000000']) {
      const res = await b.get(`/portal/api/invoice-preview?customerId=${named}`);
      expectError(res, 404, 'not_found');
      expect(res.body).not.toContain('Alpha');
    }
    const refused = logs.filter((l) => l.audit === 'portal.refused');
    expect(refused).toHaveLength(3);
    for (const [i, other] of [alpha.id, alpha.id, 'cus_guessed00000000'].entries()) {
      expect(refused[i]).toMatchObject({
        actor: { customerId: beta.id },
        otherCustomerId: other,
        route: 'GET /portal/api/invoice-preview',
        reason: 'not-itself',
      });
    }
  });
});
