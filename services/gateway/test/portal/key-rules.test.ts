import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_GRACE_SECONDS } from '../../src/keys/key-operations.js';
import { expectError } from '../support/admin.js';
import { useGateways } from '../support/helpers.js';
import { admin, adminPost, signIn } from './support.js';

/*
 * The rules a customer's key changes in the portal meet, each as the customer reads it: scopes
 * beyond its plan and the plan's maxKeys (the message naming them), a rotation's grace (the
 * default for a bare POST), the audit fields an operator reads, and an account deleted meanwhile.
 */

const gateways = useGateways();

function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'portal-keys-')), 'plans.json');
  const windows = { minute: 100 };
  const plans = {
    narrow: { windows, scopes: ['pets:read'], maxKeys: 2 },
    closed: { windows, scopes: [] },
  };
  writeFileSync(path, JSON.stringify({ plans }));
  return path;
}

describe('a customer’s key within its plan', () => {
  it('gains no scope beyond the plan, on create or change, and stops at maxKeys, each refusal saying why', async () => {
    const gw = await gateways.start({ env: { PLANS_FILE: plansFile() }, redisUrl: null });
    const narrow = await adminPost(gw, '/admin/customers', { name: 'Narrow', plan: 'narrow' });
    const browser = await signIn(gw, narrow.id as string);
    const beyond = await browser.send('POST', '/portal/api/keys', { name: 'w', scopes: ['pets:write'] });
    expectError(beyond, 400, 'invalid_request');
    expect(beyond.json().message).toBe('Your plan does not include pets:write');
    const made = await browser.send('POST', '/portal/api/keys', { name: 'r', scopes: ['pets:read'] });
    expect(made.statusCode, made.body).toBe(201);
    const id = made.json().id as string;
    const widened = await browser.send('PATCH', `/portal/api/keys/${id}`, { scopes: ['pets:read', 'pets:write'] });
    expectError(widened, 400, 'invalid_request');
    expect(widened.json().message).toBe('Your plan does not include pets:write');
    expect((await browser.get('/portal/api/keys')).json().items[0].scopes).toEqual(['pets:read']);
    // The second key is the last the plan allows: at maxKeys - 1 a create is still made.
    expect((await browser.send('POST', '/portal/api/keys', { name: 'second' })).statusCode).toBe(201);
    const third = await browser.send('POST', '/portal/api/keys', { name: 'third' });
    expectError(third, 409, 'conflict');
    expect(third.json().message).toBe('Your narrow plan allows 2 live keys: revoke one first');

    const closed = await adminPost(gw, '/admin/customers', { name: 'Closed', plan: 'closed' });
    const none = await signIn(gw, closed.id as string);
    const both = await none.send('POST', '/portal/api/keys', { name: 'x', scopes: ['pets:read', 'pets:write'] });
    expectError(both, 400, 'invalid_request');
    expect(both.json().message).toBe('Your plan does not include pets:read, pets:write');
    expect((await none.get('/portal/api/keys')).json()).toEqual({ items: [] });
  });
});

describe('a customer’s key changes as the operator reads them', () => {
  it('rotate with the default grace on a bare POST, and audit the fields of each change', async () => {
    const logs: Record<string, unknown>[] = [];
    const now = Date.parse('2026-11-26T10:00:00Z');
    const gw = await gateways.start({ logs, now: () => now, redisUrl: null });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const browser = await signIn(gw, customer.id as string);
    const key = (await browser.send('POST', '/portal/api/keys', { name: 'prod' })).json();
    const bare = await browser.send('POST', `/portal/api/keys/${key.id}/rotate`);
    expect(bare.statusCode, bare.body).toBe(200);
    expect(bare.json()).toEqual({
      id: key.id,
      key: expect.stringMatching(/^ask_/),
      previousKeyExpiresAt: new Date(now + DEFAULT_GRACE_SECONDS * 1000).toISOString(),
    });
    const short = await browser.send('POST', `/portal/api/keys/${key.id}/rotate`, { gracePeriodSeconds: 600 });
    expect(short.json().previousKeyExpiresAt).toBe(new Date(now + 600_000).toISOString());
    expect((await browser.send('PATCH', `/portal/api/keys/${key.id}`, { scopes: ['pets:read'] })).statusCode).toBe(200);

    const lines = logs.filter((l) => l.keyId === key.id && typeof l.audit === 'string');
    expect(
      lines.map(({ audit, plan, customerId, previousKeyExpiresAt, changed }) => ({
        audit,
        plan,
        customerId,
        previousKeyExpiresAt,
        changed,
      })),
    ).toEqual([
      {
        audit: 'key.created',
        plan: 'pro',
        customerId: customer.id,
        previousKeyExpiresAt: undefined,
        changed: undefined,
      },
      {
        audit: 'key.rotated',
        plan: undefined,
        customerId: undefined,
        previousKeyExpiresAt: bare.json().previousKeyExpiresAt,
        changed: undefined,
      },
      {
        audit: 'key.rotated',
        plan: undefined,
        customerId: undefined,
        previousKeyExpiresAt: short.json().previousKeyExpiresAt,
        changed: undefined,
      },
      {
        audit: 'key.updated',
        plan: undefined,
        customerId: undefined,
        previousKeyExpiresAt: undefined,
        changed: ['scopes'],
      },
    ]);
  });

  it('names the customer and what it tried in the message of a refused id', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs, redisUrl: null });
    const a = await adminPost(gw, '/admin/customers', { name: 'Alpha', plan: 'pro' });
    const b = await adminPost(gw, '/admin/customers', { name: 'Beta', plan: 'pro' });
    const beta = await signIn(gw, b.id as string);
    expect((await beta.send('DELETE', '/portal/api/keys/key_guessed')).statusCode).toBe(404);
    expect((await beta.send('POST', '/portal/api/keys', { customerId: a.id })).statusCode).toBe(404);
    expect(logs.filter((l) => l.audit === 'portal.refused').map((l) => l.msg)).toEqual([
      `portal: ${b.id} was refused key key_guessed`,
      `portal: ${b.id} was refused customer ${a.id}`,
    ]);
  });
});

describe('an account deleted while signed in', () => {
  it('ends what the session shows (401) and makes no key (404)', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Gone', plan: 'pro' });
    const browser = await signIn(gw, customer.id as string);
    const deleted = await gw.admin.inject({ method: 'DELETE', url: `/admin/customers/${customer.id}`, headers: admin });
    expect(deleted.statusCode, deleted.body).toBe(204);
    const session = await browser.get('/portal/api/session');
    expectError(session, 401, 'unauthorized');
    expect(session.json().message).toBe('Your account is gone; the session has ended');
    const made = await browser.send('POST', '/portal/api/keys', { name: 'late' });
    expectError(made, 404, 'not_found');
    expect(made.json().message).toBe('Your account is gone');
    expect((await browser.get('/portal/api/keys')).json()).toEqual({ items: [] });
  });
});
