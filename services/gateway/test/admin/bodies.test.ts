import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, expectError } from '../support/admin.js';
import { startGateway, type TestGateway } from '../support/helpers.js';

/*
 * Admin JSON bodies (admin/app.ts), for every route at once: a field the route does not define
 * and a key given twice are refused with 400 naming them, never dropped or settled silently.
 */

let gw: TestGateway;
const json = { ...auth, 'content-type': 'application/json' };

beforeAll(async () => {
  gw = await startGateway({ redisUrl: null });
});
afterAll(async () => {
  await gw?.close();
});

function send(method: string, url: string, payload: string) {
  return gw.admin.inject({ method: method as 'POST', url, headers: json, payload });
}

async function count(url: string): Promise<number> {
  return (await gw.admin.inject({ url, headers: auth })).json().items.length;
}

async function customerId(): Promise<string> {
  const res = await send('POST', '/admin/customers', JSON.stringify({ name: 'Acme', plan: 'pro' }));
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id;
}

describe('a field the route does not define', () => {
  it.each([
    ['at the top', { plan: 'free', admin: true }, 'body.admin is not a known field (known: plan, '],
    ['in limits', { plan: 'enterprise', limits: { perMinute: 3, perFortnight: 1 } }, 'body.limits.perFortnight'],
  ])('POST /admin/keys with one %s → 400 naming it, no key made', async (_where, body, message) => {
    const before = await count('/admin/keys');
    const res = await send('POST', '/admin/keys', JSON.stringify(body));
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toContain(message);
    expect(await count('/admin/keys')).toBe(before);
  });

  it('PATCH /admin/keys/:id with a typo (expiresAT) → 400 naming it, the key unchanged', async () => {
    const made = (await send('POST', '/admin/keys', JSON.stringify({ plan: 'free', name: 'k' }))).json();
    const res = await send(
      'PATCH',
      `/admin/keys/${made.id}`,
      JSON.stringify({ name: 'k2', expiresAT: '2030-01-01T00:00:00Z' }),
    );
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toMatch(/^body\.expiresAT is not a known field \(known: .*expiresAt/);
    expect((await gw.admin.inject({ url: `/admin/keys/${made.id}`, headers: auth })).json().name).toBe('k');
  });

  it.each([
    ['in billing', { billing: { timezone: 'Asia/Kolkata' } }, 'body.billing.timezone is not a known field'],
    [
      'in limits, a union with null',
      { limits: { perMinute: 5, perFortnight: 9 } },
      'body.limits.perFortnight is not a known field',
    ],
    ['at the top', { name: 'B', owner: 'me' }, 'body.owner is not a known field'],
  ])('PATCH /admin/customers/:id with one %s → 400 naming it, nothing changed', async (_where, body, message) => {
    const id = await customerId();
    const res = await send('PATCH', `/admin/customers/${id}`, JSON.stringify(body));
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toContain(message);
    const shown = (await gw.admin.inject({ url: `/admin/customers/${id}`, headers: auth })).json();
    expect(shown).toMatchObject({ name: 'Acme', billing: { anchorDay: 1, timeZone: 'UTC' } });
    expect(shown).not.toHaveProperty('ownLimits');
  });

  it('a route that takes no body refuses one with a field, and takes none, null or {}', async () => {
    const id = await customerId();
    const url = `/admin/customers/${id}/portal-sessions`;
    const res = await send('POST', url, JSON.stringify({ returnUrl: 'https://evil.example' }));
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toBe('body.returnUrl is not a known field (this operation takes no body)');
    expectError(await send('POST', url, '[1]'), 400, 'invalid_request');
    for (const payload of ['{}', 'null']) expect((await send('POST', url, payload)).statusCode).toBe(201);
    expect((await gw.admin.inject({ method: 'POST', url, headers: auth })).statusCode).toBe(201);
  });

  it('an unknown path with a body is still 404, and a body without the token still 401', async () => {
    expectError(await send('POST', '/admin/nothing-here', '{"a":1}'), 404, 'not_found');
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: { 'content-type': 'application/json' },
      payload: '{"plan":"free","x":1}',
    });
    expectError(res, 401, 'unauthorized');
  });
});

describe('a key given twice', () => {
  it.each([
    ['at the top', '{"plan":"free","name":"a","name":"b"}', '"name"'],
    ['spelled with an escape', '{"plan":"free","name":"a","n\\u0061me":"b"}', '"name"'],
    ['in limits', '{"plan":"enterprise","limits":{"perMinute":3,"perDay":30,"perDay":90}}', '"perDay"'],
  ])('POST /admin/keys with one %s → 400 naming it, no key made', async (_where, payload, key) => {
    const before = await count('/admin/keys');
    const res = await send('POST', '/admin/keys', payload);
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toBe(`Request body has the key ${key} twice in one object`);
    expect(await count('/admin/keys')).toBe(before);
  });

  it('the same name in two objects, in a string or in an array is no duplicate', async () => {
    const payload = '{"plan":"enterprise","name":"{\\"name\\":1,\\"name\\":2}","limits":{"perMinute":3,"perDay":30}}';
    const res = await send('POST', '/admin/keys', payload);
    expect(res.statusCode, res.body).toBe(201);
    const id = await customerId();
    const patched = await send('PATCH', `/admin/customers/${id}`, '{"metadata":{"plan":"x","name":"y"},"name":"Z"}');
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().metadata).toEqual({ plan: 'x', name: 'y' });
  });

  it('malformed JSON is answered as malformed, first', async () => {
    const res = await send('POST', '/admin/keys', '{"plan":"free","plan":');
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).not.toContain('twice');
  });
});
