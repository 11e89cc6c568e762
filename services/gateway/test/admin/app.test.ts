import { describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/keys/api-key.js';
import { auth, expectError, gatewayWithOneKey, pets, useEchoUpstream } from '../support/admin.js';
import { ADMIN_TOKEN } from '../support/helpers.js';

// The admin listener as a whole (admin/app.ts): the token on every route, no answer cached.
const upstream = useEchoUpstream();

describe('admin authentication', () => {
  const own = gatewayWithOneKey(upstream);

  const routes = () => [
    { method: 'GET' as const, url: '/admin/keys' },
    { method: 'POST' as const, url: '/admin/keys', payload: { plan: 'free' } },
    { method: 'GET' as const, url: `/admin/keys/${own.existing.id}` },
    { method: 'DELETE' as const, url: `/admin/keys/${own.existing.id}` },
    { method: 'DELETE' as const, url: `/admin/keys/${own.existing.id}/ban` },
    { method: 'GET' as const, url: '/admin/unknown' },
  ];

  const sameLengthWrong = `${ADMIN_TOKEN.slice(0, -1)}${ADMIN_TOKEN.endsWith('x') ? 'y' : 'x'}`;
  const badHeaders: Record<string, Record<string, string>> = {
    'no Authorization header': {},
    'an empty Authorization header': { authorization: '' },
    'a wrong token of the same length': { authorization: `Bearer ${sameLengthWrong}` },
    'a shorter token': { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` },
    'a longer token': { authorization: `Bearer ${ADMIN_TOKEN}0` },
    'the token without the Bearer scheme': { authorization: ADMIN_TOKEN },
    'the token as Basic credentials': { authorization: `Basic ${ADMIN_TOKEN}` },
    'Bearer with no token': { authorization: 'Bearer ' },
    'an API key instead of the token': { authorization: `Bearer ${generateApiKey()}` },
  };

  for (const [index, [label, headers]] of Object.entries(badHeaders).entries()) {
    it(`answers 401 to ${label} on every route`, async () => {
      // An address of its own per case: each makes fewer failures than the failed-auth limit.
      const remoteAddress = `192.0.2.${index + 1}`;
      for (const route of routes()) {
        const res = await own.gw.admin.inject({ ...route, headers, remoteAddress });
        expectError(res, 401, 'unauthorized');
        expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="animal-store"/);
        expect(res.body).not.toContain(own.existing.id);
      }
    });
  }

  it.each([
    { name: 'no token', headers: {}, challenge: 'Bearer realm="animal-store"' },
    {
      name: 'a wrong token',
      headers: { authorization: `Bearer ${sameLengthWrong}` },
      challenge: 'Bearer realm="animal-store", error="invalid_token", error_description="The admin token is not valid"',
    },
  ])('answers 401 to $name with WWW-Authenticate: $challenge', async ({ headers, challenge }) => {
    const res = await own.gw.admin.inject({ url: '/admin/keys', headers, remoteAddress: '192.0.2.200' });
    expectError(res, 401, 'unauthorized');
    expect(res.headers['www-authenticate']).toBe(challenge);
  });

  it('changed nothing while refusing: the key still exists, unrevoked, and no key was added', async () => {
    const list = await own.gw.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth });
    expect(list.statusCode).toBe(200);
    expect(list.json().items).toHaveLength(1);
    expect(list.json().items[0].id).toBe(own.existing.id);
    expect(list.json().items[0]).not.toHaveProperty('revokedAt');
    expect((await pets(own.gw, own.existing.key)).statusCode).toBe(200);
  });

  it('accepts the scheme in any case', async () => {
    const res = await own.gw.admin.inject({
      method: 'GET',
      url: '/admin/keys',
      headers: { authorization: `bearer ${ADMIN_TOKEN}` },
    });
    expect(res.statusCode).toBe(200);
  });

  it('is not served on the public listener, even with the admin token', async () => {
    for (const route of routes()) {
      const res = await own.gw.app.inject({ ...route, headers: auth });
      expectError(res, 401, 'invalid_api_key');
    }
  });
});

describe('admin answers are never cached', () => {
  const own = gatewayWithOneKey(upstream);

  const json = { ...auth, 'content-type': 'application/json' };
  const cases = [
    {
      name: 'create (a plaintext key)',
      method: 'POST' as const,
      url: '/admin/keys',
      headers: json,
      payload: '{"plan":"free"}',
      status: 201,
    },
    {
      name: 'rotate (a plaintext key)',
      method: 'POST' as const,
      url: '/admin/keys/:id/rotate',
      headers: json,
      payload: '{}',
      status: 200,
    },
    { name: 'list', method: 'GET' as const, url: '/admin/keys', headers: auth, status: 200 },
    { name: 'show', method: 'GET' as const, url: '/admin/keys/:id', headers: auth, status: 200 },
    { name: 'an unknown id', method: 'GET' as const, url: '/admin/keys/key_nope', headers: auth, status: 404 },
    {
      name: 'a bad body',
      method: 'POST' as const,
      url: '/admin/keys',
      headers: json,
      payload: '{"plan":"gold"}',
      status: 400,
    },
    { name: 'no token', method: 'GET' as const, url: '/admin/keys', headers: {}, status: 401 },
    { name: 'a wrong method', method: 'PUT' as const, url: '/admin/keys', headers: auth, status: 405 },
    { name: 'an unknown route', method: 'GET' as const, url: '/admin/nope', headers: auth, status: 404 },
    { name: 'a URL that does not decode', method: 'GET' as const, url: '/admin/keys/%zz', headers: auth, status: 400 },
  ];

  it.each(cases)('$name → Cache-Control: no-store', async ({ status, url, ...request }) => {
    const res = await own.gw.admin.inject({ ...request, url: url.replace(':id', own.existing.id) });
    expect(res.statusCode, res.body).toBe(status);
    expect(res.headers['cache-control']).toBe('no-store');
  });
});
