import { describe, expect, it } from 'vitest';
import { expectError } from '../support/admin.js';
import { useGateways } from '../support/helpers.js';
import { adminPost, signIn } from './support.js';

/*
 * What the portal's schemas refuse, before any route runs: each request is answered 400 in the
 * Error shape, and the customer's keys are as they were. Without its schema, each row would be
 * answered otherwise (a parameter ignored, an id looked up, a body taken), which is what the
 * table pins.
 */

const gateways = useGateways();
const LONG_ID = 'k'.repeat(65);

describe('requests the portal refuses by their shape', () => {
  it('answers each with 400 invalid_request and changes nothing', async () => {
    const gw = await gateways.start();
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const made = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
    const browser = await signIn(gw, customer.id as string);
    const keysBefore = (await browser.get('/portal/api/keys')).json();

    const rows: Array<[string, () => ReturnType<typeof browser.get>]> = [
      ['a history parameter it does not know', () => browser.get('/portal/api/usage/history?bogus=1')],
      ['a history key id over 64 characters', () => browser.get(`/portal/api/usage/history?keyId=${LONG_ID}`)],
      ['an invoice parameter it does not know', () => browser.get('/portal/api/invoice-preview?bogus=1')],
      [
        'a rotation with a negative grace',
        () => browser.send('POST', `/portal/api/keys/${made.id}/rotate`, { gracePeriodSeconds: -1 }),
      ],
      [
        'a rotation whose grace is text',
        () => browser.send('POST', `/portal/api/keys/${made.id}/rotate`, { gracePeriodSeconds: 'ten' }),
      ],
      ['a revocation of a key id over 64 characters', () => browser.send('DELETE', `/portal/api/keys/${LONG_ID}`)],
      [
        'a successor for a leak id over 64 characters',
        () => browser.send('POST', `/portal/api/leaks/${LONG_ID}/successor`),
      ],
    ];
    for (const [what, send] of rows) {
      const res = await send();
      expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
      expectError(res, 400, 'invalid_request');
    }
    expect((await browser.get('/portal/api/keys')).json()).toEqual(keysBefore);
  });
});
