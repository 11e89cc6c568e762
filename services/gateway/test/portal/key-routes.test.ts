import { describe, expect, it } from 'vitest';
import { expectError } from '../support/admin.js';
import { bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';
import { admin, adminPost, signIn } from './support.js';

/*
 * A customer's own keys in the portal: created up to its plan's maxKeys, rotated with a grace
 * period, narrowed, revoked; each change the admin API's rules, audited with the customer as the
 * actor and sent to the webhook endpoints as the admin API's changes are.
 */

const gateways = useGateways();

async function adminGetKeys(gw: TestGateway, customerId: string) {
  return (await gw.admin.inject({ url: `/admin/keys?customerId=${customerId}`, headers: admin })).json();
}
const LOCAL = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };

describe('a customer’s keys in the portal', () => {
  it('are created, rotated, narrowed and revoked, audited with the customer as actor, with the usual webhooks', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: LOCAL, logs });
    const hook = await startReceiver();
    try {
      await adminPost(gw, '/admin/webhooks', {
        url: hook.url,
        events: ['key.created', 'key.updated', 'key.rotated', 'key.revoked'],
      });
      const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
      const browser = await signIn(gw, customer.id as string);

      const created = await browser.send('POST', '/portal/api/keys', { name: 'prod' });
      expect(created.statusCode, created.body).toBe(201);
      const key = created.json();
      expect(key).toMatchObject({
        name: 'prod',
        plan: 'pro',
        customerId: customer.id,
        key: expect.stringMatching(/^ask_/),
      });
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key) })).statusCode).toBe(200);

      const rotated = await browser.send('POST', `/portal/api/keys/${key.id}/rotate`, { gracePeriodSeconds: 600 });
      expect(rotated.statusCode, rotated.body).toBe(200);
      expect(rotated.json()).toMatchObject({ id: key.id, key: expect.stringMatching(/^ask_/) });
      // Both secrets work during the grace period.
      for (const secret of [key.key, rotated.json().key]) {
        expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(secret) })).statusCode).toBe(200);
      }

      const narrowed = await browser.send('PATCH', `/portal/api/keys/${key.id}`, {
        scopes: ['pets:read'],
        allowedCidrs: ['10.0.0.0/8'],
      });
      expect(narrowed.statusCode, narrowed.body).toBe(200);
      expect(narrowed.json()).toMatchObject({ scopes: ['pets:read'], allowedCidrs: ['10.0.0.0/8'] });
      const listed = (await browser.get('/portal/api/keys')).json();
      expect(listed.items.map((k: { id: string }) => k.id)).toEqual([key.id]);

      expect((await browser.send('DELETE', `/portal/api/keys/${key.id}`)).statusCode).toBe(204);
      expect((await browser.get('/portal/api/keys')).json()).toEqual({ items: [] });
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(rotated.json().key) })).statusCode).toBe(401);

      await hook.until(4);
      expect(hook.events().map((e) => e.type)).toEqual(['key.created', 'key.rotated', 'key.updated', 'key.revoked']);
      for (const e of hook.events()) expect(e.data).toMatchObject({ keyId: key.id, customerId: customer.id });
      const audited = logs.filter((l) => l.keyId === key.id && typeof l.audit === 'string');
      expect(audited.map((l) => [l.audit, l.actor])).toEqual([
        ['key.created', { customerId: customer.id }],
        ['key.rotated', { customerId: customer.id }],
        ['key.updated', { customerId: customer.id }],
        ['key.revoked', { customerId: customer.id }],
      ]);
    } finally {
      await hook.close();
    }
  });

  it('stop at the plan’s maxKeys, never gain a scope beyond the plan, and are never made for another customer', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Small', plan: 'free' });
    const browser = await signIn(gw, customer.id as string);
    const other = await adminPost(gw, '/admin/customers', { name: 'Other', plan: 'free' });
    expectError(await browser.send('POST', '/portal/api/keys', { name: 'x', customerId: other.id }), 404, 'not_found');
    expectError(
      await browser.send('POST', '/portal/api/keys', { name: 'x', scopes: ['admin'] }),
      400,
      'invalid_request',
    );
    expect((await adminGetKeys(gw, other.id as string)).items).toEqual([]);
    for (let i = 0; i < 5; i++)
      expect((await browser.send('POST', '/portal/api/keys', { name: `k${i}` })).statusCode).toBe(201);
    expectError(await browser.send('POST', '/portal/api/keys', { name: 'one too many' }), 409, 'conflict');
  });
});

describe('two customers in the portal', () => {
  it('reach nothing of each other: another’s, a guessed or a revoked id in a path, a query or a body is the same 404 and the same audit line', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs });
    const a = await adminPost(gw, '/admin/customers', { name: 'Alpha', plan: 'pro' });
    const b = await adminPost(gw, '/admin/customers', { name: 'Beta', plan: 'pro' });
    const alpha = await signIn(gw, a.id as string);
    const beta = await signIn(gw, b.id as string);
    const alphaKey = (await alpha.send('POST', '/portal/api/keys', { name: 'alpha-prod' })).json();
    const betaKey = (await beta.send('POST', '/portal/api/keys', { name: 'beta-prod' })).json();
    const betaGone = (await beta.send('POST', '/portal/api/keys', { name: 'beta-gone' })).json();
    expect((await beta.send('DELETE', `/portal/api/keys/${betaGone.id}`)).statusCode).toBe(204);
    const loose = await adminPost(gw, '/admin/keys', { plan: 'pro', name: 'no customer' });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(alphaKey.key) });

    // Another customer's key, a key of no customer, a guess and Beta's own revoked key: each of
    // them the same 404 on every route that takes a key id, and the same audit line, which only
    // the operator reads the reason in.
    const tried = [
      [alphaKey.id, 'another-customer'],
      [loose.id, 'no-customer'],
      ['key_guessed000000000', 'unknown'],
      [betaGone.id, 'revoked'],
    ] as const;
    const routes = [
      ['POST', '/portal/api/keys/:id/rotate'],
      ['PATCH', '/portal/api/keys/:id'],
      ['DELETE', '/portal/api/keys/:id'],
      ['GET', '/portal/api/usage/history'],
    ] as const;
    const before = logs.length;
    for (const [id] of tried) {
      for (const res of [
        await beta.send('POST', `/portal/api/keys/${id}/rotate`),
        await beta.send('PATCH', `/portal/api/keys/${id}`, { scopes: ['pets:read'] }),
        await beta.send('DELETE', `/portal/api/keys/${id}`),
        await beta.get(`/portal/api/usage/history?keyId=${id}`),
      ]) {
        expectError(res, 404, 'not_found');
        expect(res.json().message).toBe(`No key with id ${id}`);
      }
    }
    const refused = logs.slice(before).filter((l) => l.audit === 'portal.refused');
    expect(refused.map((l) => [l.actor, l.keyId, l.route, l.reason])).toEqual(
      tried.flatMap(([id, reason]) =>
        routes.map(([method, route]) => [{ customerId: b.id }, id, `${method} ${route}`, reason]),
      ),
    );
    expect(refused.map((l) => l.owner)).toEqual(
      tried.flatMap(([, reason]) =>
        routes.map(() => ({ 'another-customer': a.id, 'no-customer': null })[reason as string]),
      ),
    );
    // Alpha's id swapped into a body: no key is made for Alpha.
    expectError(await beta.send('POST', '/portal/api/keys', { name: 'for alpha', customerId: a.id }), 404, 'not_found');
    expect(logs.filter((l) => l.audit === 'portal.refused').at(-1)).toMatchObject({
      actor: { customerId: b.id },
      otherCustomerId: a.id,
      route: 'POST /portal/api/keys',
      reason: 'not-itself',
    });

    // Nothing of Alpha's changed, and each sees only its own keys, usage and history.
    const adminView = await gw.admin.inject({ url: `/admin/keys/${alphaKey.id}`, headers: admin });
    expect(adminView.json()).toMatchObject({ name: 'alpha-prod', scopes: ['pets:read', 'pets:write'] });
    expect(adminView.json().revokedAt).toBeUndefined();
    expect((await beta.get('/portal/api/keys')).json().items.map((k: { id: string }) => k.id)).toEqual([betaKey.id]);
    expect((await beta.get('/portal/api/usage/history')).json()).toMatchObject({ id: b.id, totals: { units: 0 } });
    expect((await alpha.get('/portal/api/usage/history')).json()).toMatchObject({ id: a.id, totals: { units: 1 } });
    expect((await beta.get('/portal/api/usage')).json()).toMatchObject({ id: b.id });
  });
});
