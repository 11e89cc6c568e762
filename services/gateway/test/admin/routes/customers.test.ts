import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../../support/helpers.js';

/*
 * /admin/customers: the accounts above the keys. What an operator sees and may do through the
 * admin API, on the embedded stores (the Mongo store passes the same contract suite).
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);
/** 10:00 UTC on 26 November 2026: Paris is at UTC+1, New York at UTC−5. */
const NOW = Date.parse('2026-11-26T10:00:00.000Z');

async function start(logs: Record<string, unknown>[] = []): Promise<TestGateway> {
  let now = NOW;
  // Each request a millisecond later, so customers created in a row keep their order.
  return gateways.start({ redisUrl: null, logs, now: () => now++, env: { LOG_LEVEL: 'info' } });
}

function call(gw: TestGateway, method: string, url: string, payload?: object): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ method: method as 'GET', url, headers: admin, ...(payload ? { payload } : {}) });
}

async function create(gw: TestGateway, body: object): Promise<Record<string, unknown>> {
  const res = await call(gw, 'POST', '/admin/customers', body);
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

describe('POST /admin/customers', () => {
  it('creates a customer on a plan, with its limits in force and the billing period it is in', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await start(logs);
    const made = await create(gw, { name: 'Acme', plan: 'pro', externalId: 'cus_Stripe42', metadata: { crm: '7' } });
    expect(made).toMatchObject({
      name: 'Acme',
      plan: 'pro',
      billing: { anchorDay: 1, timeZone: 'UTC' },
      currentPeriod: { start: '2026-11-01T00:00:00.000Z', end: '2026-12-01T00:00:00.000Z' },
      externalId: 'cus_Stripe42',
      metadata: { crm: '7' },
    });
    expect(made.id).toMatch(/^cus_[A-Za-z0-9]{16}$/);
    // The same limits as a pro key of its own has.
    expect(made.limits).toEqual((await call(gw, 'POST', '/admin/keys', { plan: 'pro' })).json().limits);
    expect(made).not.toHaveProperty('ownLimits');
    expect((await call(gw, 'GET', `/admin/customers/${made.id}`)).json()).toEqual(made);
    expect(logs.filter((l) => l.audit === 'customer.created' && l.customerId === made.id)).toMatchObject([
      { plan: 'pro', externalId: 'cus_Stripe42' },
    ]);
    const plain = await create(gw, { name: 'Plain', plan: 'free' });
    const [audited] = logs.filter((l) => l.audit === 'customer.created' && l.customerId === plain.id);
    expect(audited).toMatchObject({ plan: 'free' });
    expect(audited).not.toHaveProperty('externalId');
  });

  it("counts its month from its anchor day at midnight in its zone, stored under the zone's own name", async () => {
    const gw = await start();
    const made = await create(gw, { name: 'Zut', plan: 'pro', billing: { anchorDay: 15, timeZone: 'europe/paris' } });
    expect(made.billing).toEqual({ anchorDay: 15, timeZone: 'Europe/Paris' });
    expect(made.currentPeriod).toEqual({ start: '2026-11-14T23:00:00.000Z', end: '2026-12-14T23:00:00.000Z' });
  });

  it.each([
    ['Asia/Kolkata', '2026-10-31T18:30:00.000Z'],
    ['Asia/Kathmandu', '2026-10-31T18:15:00.000Z'],
    ['UTC', '2026-11-01T00:00:00.000Z'],
  ])('keeps the zone %s as given, on create, read and patch', async (timeZone, periodStart) => {
    const gw = await start();
    const made = await create(gw, { name: 'Zone', plan: 'pro', billing: { timeZone } });
    expect(made.billing).toEqual({ anchorDay: 1, timeZone });
    expect((made.currentPeriod as { start: string }).start).toBe(periodStart);
    expect((await call(gw, 'GET', `/admin/customers/${made.id}`)).json().billing.timeZone).toBe(timeZone);
    const other = await create(gw, { name: 'Other', plan: 'pro' });
    const patched = await call(gw, 'PATCH', `/admin/customers/${other.id}`, { billing: { timeZone } });
    expect(patched.json().billing.timeZone).toBe(timeZone);
  });

  it('keeps its own limits over its plan and shows both', async () => {
    const gw = await start();
    const made = await create(gw, { name: 'Big', plan: 'pro', limits: { perMinute: 1000 } });
    expect(made.ownLimits).toEqual({ perMinute: 1000 });
    expect((made.limits as Record<string, number>).perMinute).toBe(1000);
  });

  it.each([
    ['no name', { plan: 'pro' }, 'name'],
    ['an unknown plan', { name: 'A', plan: 'platinum' }, 'plan'],
    ['enterprise without limits', { name: 'A', plan: 'enterprise' }, 'limits'],
    ['limits out of order', { name: 'A', plan: 'pro', limits: { perMinute: 10, perSecond: 50 } }, 'perSecond'],
    ['anchor day 29', { name: 'A', plan: 'pro', billing: { anchorDay: 29 } }, 'anchorDay'],
    ['anchor day 31', { name: 'A', plan: 'pro', billing: { anchorDay: 31 } }, 'anchorDay'],
    ['anchor day 0', { name: 'A', plan: 'pro', billing: { anchorDay: 0 } }, 'anchorDay'],
    ['an unknown zone', { name: 'A', plan: 'pro', billing: { timeZone: 'Mars/Olympus' } }, 'timeZone'],
    ['an offset for a zone', { name: 'A', plan: 'pro', billing: { timeZone: '+05:00' } }, 'IANA time zone name'],
    ['empty billing', { name: 'A', plan: 'pro', billing: {} }, 'billing'],
    ['a control character in the name', { name: 'A\u0007', plan: 'pro' }, 'name'],
    ['a space in externalId', { name: 'A', plan: 'pro', externalId: 'two words' }, 'externalId'],
    ['a number in metadata', { name: 'A', plan: 'pro', metadata: { n: 1 } }, 'metadata'],
  ])('refuses %s with 400 naming the field, creating nothing', async (_case, body, field) => {
    const gw = await start();
    const res = await call(gw, 'POST', '/admin/customers', body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(res.json().message).toContain(field);
    expect((await call(gw, 'GET', '/admin/customers')).json().items).toEqual([]);
  });

  it('refuses a second live customer with the same externalId (409); a deleted one frees it', async () => {
    const gw = await start();
    const first = await create(gw, { name: 'A', plan: 'pro', externalId: 'crm-1' });
    const clash = await call(gw, 'POST', '/admin/customers', { name: 'B', plan: 'pro', externalId: 'crm-1' });
    expect(clash.statusCode).toBe(409);
    expect(clash.json()).toMatchObject({ code: 'conflict', message: 'Another customer already has this externalId' });
    expect((await call(gw, 'DELETE', `/admin/customers/${first.id}`)).statusCode).toBe(204);
    await create(gw, { name: 'B', plan: 'pro', externalId: 'crm-1' });
  });
});

describe('GET /admin/customers', () => {
  it('pages newest first behind a cursor, and filters by name prefix, plan and externalId', async () => {
    const gw = await start();
    const made = [];
    for (let i = 0; i < 7; i++) {
      made.push(await create(gw, { name: i % 2 ? `Acme ${i}` : `Zeta ${i}`, plan: i < 3 ? 'free' : 'pro' }));
    }
    const seen: string[] = [];
    let url = '/admin/customers?limit=3';
    for (;;) {
      const page = (await call(gw, 'GET', url)).json();
      expect(page.items.length).toBeLessThanOrEqual(3);
      seen.push(...page.items.map((c: { id: string }) => c.id));
      if (page.next === null) break;
      url = `/admin/customers?limit=3&after=${encodeURIComponent(page.next)}`;
    }
    expect(seen).toEqual(made.map((c) => c.id).reverse());
    const names = async (query: string) =>
      (await call(gw, 'GET', `/admin/customers?${query}`)).json().items.map((c: { name: string }) => c.name);
    expect(await names('name=acme')).toEqual(['Acme 5', 'Acme 3', 'Acme 1']);
    expect(await names('plan=free')).toEqual(['Zeta 2', 'Acme 1', 'Zeta 0']);
    expect(await names('plan=free&name=zeta')).toEqual(['Zeta 2', 'Zeta 0']);
  });

  it.each([
    ['a cursor it did not make', 'after=bm90LWEtY3Vyc29y', 'after'],
    ['a limit over 500', 'limit=501', 'limit'],
    ['a limit of 0', 'limit=0', 'limit'],
    ['an unknown parameter', 'sort=name', 'sort'],
  ])('refuses %s with 400 naming it', async (_case, query, field) => {
    const gw = await start();
    const res = await call(gw, 'GET', `/admin/customers?${query}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().message).toContain(field);
  });

  it('names the cursor it refuses as after, and pages 50 at a time when given no limit', async () => {
    const gw = await start();
    const bad = await call(gw, 'GET', '/admin/customers?after=bm90LWEtY3Vyc29y');
    expect(bad.json().message).toMatch(/^after: /);
    for (let i = 0; i < 51; i++) await create(gw, { name: `C${i}`, plan: 'pro' });
    const first = (await call(gw, 'GET', '/admin/customers')).json();
    expect(first.items).toHaveLength(50);
    expect(first.next).not.toBeNull();
    const rest = (await call(gw, 'GET', `/admin/customers?after=${encodeURIComponent(first.next)}`)).json();
    expect(rest.items.map((c: { name: string }) => c.name)).toEqual(['C0']);
    expect(rest.next).toBeNull();
  });

  it('answers 404 for a customer that does not exist', async () => {
    const gw = await start();
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'x' }],
      ['DELETE', undefined],
    ] as const) {
      const res = await call(gw, method, '/admin/customers/cus_0000000000000000', body);
      expect(res.statusCode, `${method} ${res.body}`).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
  });
});

describe('PATCH /admin/customers/:id', () => {
  it("keeps a customer's own limits on a rename or new billing settings; a plan change replaces them", async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await start(logs);
    const made = await create(gw, { name: 'Acme', plan: 'pro', limits: { perMinute: 1000 } });
    const renamed = (await call(gw, 'PATCH', `/admin/customers/${made.id}`, { name: 'Acme Ltd' })).json();
    expect(renamed.ownLimits).toEqual({ perMinute: 1000 });
    const rebilled = await call(gw, 'PATCH', `/admin/customers/${made.id}`, {
      billing: { timeZone: 'America/New_York' },
    });
    expect(rebilled.json()).toMatchObject({
      ownLimits: { perMinute: 1000 },
      billing: { anchorDay: 1, timeZone: 'America/New_York' },
      currentPeriod: { start: '2026-11-01T04:00:00.000Z', end: '2026-12-01T05:00:00.000Z' },
    });
    const moved = (await call(gw, 'PATCH', `/admin/customers/${made.id}`, { plan: 'business' })).json();
    expect(moved.plan).toBe('business');
    expect(moved).not.toHaveProperty('ownLimits');
    const updates = logs.filter((l) => l.audit === 'customer.updated');
    expect(updates.map((l) => l.changed)).toEqual([['name'], ['billing'], ['plan']]);
    expect(updates[2]).toMatchObject({ from: 'pro', to: 'business' });
    for (const l of updates.slice(0, 2)) {
      expect(l).not.toHaveProperty('from');
      expect(l).not.toHaveProperty('credits');
    }
  });

  it('audits the credit terms as given, and no move for a plan given as it stands', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await start(logs);
    const made = await create(gw, { name: 'Acme', plan: 'pro' });
    const terms = { refill: { amount: 20, every: 'day' } };
    for (const body of [{ credits: terms }, { credits: null }, { plan: 'pro' }]) {
      const res = await call(gw, 'PATCH', `/admin/customers/${made.id}`, body);
      expect(res.statusCode, res.body).toBe(200);
    }
    const updates = logs.filter((l) => l.audit === 'customer.updated');
    expect(updates).toMatchObject([
      { changed: ['credits'], credits: terms },
      { changed: ['credits'], credits: null },
      { changed: ['plan'] },
    ]);
    expect(updates[2]).not.toHaveProperty('from');
  });

  it("drops a customer's own limits on limits: null, back to its plan's; refuses a change its plan refuses, changing nothing", async () => {
    const gw = await start();
    const plain = await create(gw, { name: 'Plain', plan: 'pro' });
    const made = await create(gw, { name: 'Acme', plan: 'pro', limits: { perMinute: 1000 } });
    for (const [body, field] of [
      [{ limits: { perMinute: 10, perSecond: 50 } }, 'perSecond'],
      [{ plan: 'platinum' }, 'plan'],
    ] as const) {
      const res = await call(gw, 'PATCH', `/admin/customers/${made.id}`, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().message).toContain(field);
    }
    expect((await call(gw, 'GET', `/admin/customers/${made.id}`)).json()).toMatchObject({
      plan: 'pro',
      ownLimits: { perMinute: 1000 },
      limits: { perMinute: 1000 },
    });
    const dropped = await call(gw, 'PATCH', `/admin/customers/${made.id}`, { limits: null });
    expect(dropped.statusCode, dropped.body).toBe(200);
    expect(dropped.json()).not.toHaveProperty('ownLimits');
    expect(dropped.json().limits).toEqual(plain.limits);
  });

  // A billing change names only what it changes: a new zone keeps the anchor day, and a new day the zone.
  it('keeps a customer anchored on the 15th on the 15th when only its time zone changes, and its zone when only the day does', async () => {
    const gw = await start();
    const made = await create(gw, { name: 'Mid', plan: 'pro', billing: { anchorDay: 15, timeZone: 'Europe/Paris' } });
    const rezoned = await call(gw, 'PATCH', `/admin/customers/${made.id}`, {
      billing: { timeZone: 'America/New_York' },
    });
    expect(rezoned.statusCode, rezoned.body).toBe(200);
    const expected = {
      billing: { anchorDay: 15, timeZone: 'America/New_York' },
      currentPeriod: { start: '2026-11-15T05:00:00.000Z', end: '2026-12-15T05:00:00.000Z' },
    };
    expect(rezoned.json()).toMatchObject(expected);
    expect((await call(gw, 'GET', `/admin/customers/${made.id}`)).json()).toMatchObject(expected);
    const redated = await call(gw, 'PATCH', `/admin/customers/${made.id}`, { billing: { anchorDay: 28 } });
    expect(redated.json()).toMatchObject({
      billing: { anchorDay: 28, timeZone: 'America/New_York' },
      currentPeriod: { start: '2026-10-28T04:00:00.000Z', end: '2026-11-28T05:00:00.000Z' },
    });
  });

  it('removes externalId and metadata given as null, and refuses an empty change', async () => {
    const gw = await start();
    const made = await create(gw, { name: 'A', plan: 'pro', externalId: 'x', metadata: { a: 'b' } });
    const cleared = (
      await call(gw, 'PATCH', `/admin/customers/${made.id}`, { externalId: null, metadata: null })
    ).json();
    expect(cleared).not.toHaveProperty('externalId');
    expect(cleared).not.toHaveProperty('metadata');
    expect((await call(gw, 'PATCH', `/admin/customers/${made.id}`, {})).statusCode).toBe(400);
  });
});

describe("a customer's keys", () => {
  it("are created on the customer's plan, with own limits only tighter than the customer's", async () => {
    const gw = await start();
    const customer = await create(gw, { name: 'A', plan: 'pro', limits: { perMinute: 300 } });
    const key = await call(gw, 'POST', '/admin/keys', { customerId: customer.id, name: 'ci' });
    expect(key.statusCode, key.body).toBe(201);
    expect(key.json()).toMatchObject({ plan: 'pro', customerId: customer.id });
    const tighter = await call(gw, 'POST', '/admin/keys', { customerId: customer.id, limits: { perMinute: 100 } });
    expect(tighter.statusCode, tighter.body).toBe(201);
    for (const [body, field] of [
      [{ customerId: customer.id, limits: { perMinute: 301 } }, 'limits.perMinute'],
      [{ customerId: customer.id, plan: 'free' }, 'plan'],
      [{ customerId: 'cus_nobody' }, 'customerId'],
      [{ name: 'no plan, no customer' }, 'plan'],
    ] as const) {
      const res = await call(gw, 'POST', '/admin/keys', body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().message).toContain(field);
    }
  });

  // Equal is not looser: a key may have its customer's own limit as its own, on create and on PATCH.
  it("accept an own limit equal to the customer's in force, refusing one more, on create and on change", async () => {
    const gw = await start();
    const customer = await create(gw, { name: 'A', plan: 'pro', limits: { perMinute: 300 } });
    const equal = await call(gw, 'POST', '/admin/keys', { customerId: customer.id, limits: { perMinute: 300 } });
    expect(equal.statusCode, equal.body).toBe(201);
    expect(equal.json().limits.perMinute).toBe(300);
    const key = (await call(gw, 'POST', '/admin/keys', { customerId: customer.id, limits: { perMinute: 10 } })).json();
    const raised = await call(gw, 'PATCH', `/admin/keys/${key.id}`, { limits: { perMinute: 300 } });
    expect(raised.statusCode, raised.body).toBe(200);
    expect(raised.json().limits.perMinute).toBe(300);
    const looser = await call(gw, 'PATCH', `/admin/keys/${key.id}`, { limits: { perMinute: 301 } });
    expect(looser.statusCode, looser.body).toBe(400);
    expect(looser.json().message).toContain('limits.perMinute (301) cannot exceed');
    // The plan's figure when the customer has none of its own: pro's perDay, and one more.
    const plain = await create(gw, { name: 'B', plan: 'pro' });
    const planned = (customer.limits as Record<string, number>).perDay as number;
    expect(planned).toBeGreaterThan(0);
    const atPlan = await call(gw, 'POST', '/admin/keys', { customerId: plain.id, limits: { perDay: planned } });
    expect(atPlan.statusCode, atPlan.body).toBe(201);
    const overPlan = await call(gw, 'POST', '/admin/keys', { customerId: plain.id, limits: { perDay: planned + 1 } });
    expect(overPlan.statusCode, overPlan.body).toBe(400);
  });

  // Joining brings the key's own limits along: they meet the same rule as if given with the move.
  it("join a customer by PATCH with own limits at the customer's, and are refused one above, left alone", async () => {
    const gw = await start();
    const customer = await create(gw, { name: 'A', plan: 'pro', limits: { perMinute: 300 } });
    const lone = async (perMinute: number) =>
      (await call(gw, 'POST', '/admin/keys', { plan: 'pro', limits: { perMinute } })).json();
    const [at, above] = [await lone(300), await lone(301)];
    const joined = await call(gw, 'PATCH', `/admin/keys/${at.id}`, { customerId: customer.id });
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json()).toMatchObject({ customerId: customer.id, limits: { perMinute: 300 } });
    const refused = await call(gw, 'PATCH', `/admin/keys/${above.id}`, { customerId: customer.id });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().message).toContain('limits.perMinute (301) cannot exceed');
    const after = (await call(gw, 'GET', `/admin/keys/${above.id}`)).json();
    expect(after).not.toHaveProperty('customerId');
    expect(after.limits.perMinute).toBe(301);
  });

  it("move between customers by PATCH, taking the new customer's plan, audited", async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await start(logs);
    const a = await create(gw, { name: 'A', plan: 'pro' });
    const b = await create(gw, { name: 'B', plan: 'business' });
    const key = (await call(gw, 'POST', '/admin/keys', { customerId: a.id })).json();
    const moved = await call(gw, 'PATCH', `/admin/keys/${key.id}`, { customerId: b.id });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json()).toMatchObject({ customerId: b.id, plan: 'business' });
    const alone = (await call(gw, 'PATCH', `/admin/keys/${key.id}`, { customerId: null })).json();
    expect(alone).not.toHaveProperty('customerId');
    expect(alone.plan).toBe('business');
    expect(logs.filter((l) => l.audit === 'key.updated' && l.keyId === key.id)).toMatchObject([
      { fromCustomer: a.id, toCustomer: b.id, from: 'pro', to: 'business' },
      { fromCustomer: b.id, toCustomer: null },
    ]);
    const nowhere = await call(gw, 'PATCH', `/admin/keys/${key.id}`, { customerId: 'cus_nobody' });
    expect(nowhere.statusCode).toBe(400);
  });

  it('follow their customer to a new plan', async () => {
    const gw = await start();
    const customer = await create(gw, { name: 'A', plan: 'free' });
    const key = (await call(gw, 'POST', '/admin/keys', { customerId: customer.id })).json();
    await call(gw, 'PATCH', `/admin/customers/${customer.id}`, { plan: 'pro' });
    expect((await call(gw, 'GET', `/admin/keys/${key.id}`)).json().plan).toBe('pro');
  });

  it('keep a customer from being deleted until revoked, or revoked with it on ?revokeKeys=true', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await start(logs);
    const customer = await create(gw, { name: 'A', plan: 'pro' });
    const made = await call(gw, 'POST', '/admin/keys', { customerId: customer.id });
    const key = made.json();
    const refused = await call(gw, 'DELETE', `/admin/customers/${customer.id}`);
    expect(refused.statusCode).toBe(409);
    expect(refused.json().message).toContain('revokeKeys=true');
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key) })).statusCode).not.toBe(401);

    const gone = await call(gw, 'DELETE', `/admin/customers/${customer.id}?revokeKeys=true`);
    expect(gone.statusCode).toBe(204);
    expect((await call(gw, 'GET', `/admin/customers/${customer.id}`)).statusCode).toBe(404);
    expect((await call(gw, 'GET', `/admin/keys/${key.id}`)).json().revokedAt).toBeDefined();
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key) })).statusCode).toBe(401);
    expect(logs.filter((l) => l.audit === 'key.revoked' && l.keyId === key.id)).toHaveLength(1);
    expect(logs.filter((l) => l.audit === 'customer.deleted')).toMatchObject([{ revokedKeys: 1 }]);
  });
});
