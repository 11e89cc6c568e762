import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { hashApiKey } from '../../../src/keys/api-key.js';
import { auth, expectError } from '../../support/admin.js';
import { type TestGateway, useGateways } from '../../support/helpers.js';

/*
 * API_KEYS_FILE's customers, loaded read-only in front of the customer store: found, listed beside
 * the stored ones, their keys made through the admin API, changed only in the file.
 */

const gateways = useGateways();
let dir: string;
let file: string;

const FILE = {
  keys: [{ id: 'key_filed', name: 'filed', plan: 'pro', sha256: hashApiKey('filed'), customerId: 'cus_fromfile' }],
  customers: [
    {
      id: 'cus_fromfile',
      name: 'Acme from file',
      plan: 'pro',
      limits: { perMinute: 100 },
      billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
      externalId: 'ext-file',
    },
  ],
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'file-customers-'));
  file = join(dir, 'keys.json');
  await writeFile(file, JSON.stringify(FILE));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function start(): Promise<TestGateway> {
  let now = Date.parse('2026-11-26T10:00:00.000Z');
  return gateways.start({ redisUrl: null, now: () => now++, env: { API_KEYS_FILE: file } });
}

describe('customers from API_KEYS_FILE', () => {
  it('are found by id and listed beside the stored ones, newest first', async () => {
    const gw = await start();
    const shown = await gw.admin.inject({ url: '/admin/customers/cus_fromfile', headers: auth });
    expect(shown.statusCode, shown.body).toBe(200);
    expect(shown.json()).toMatchObject({
      id: 'cus_fromfile',
      plan: 'pro',
      limits: { perMinute: 100 },
      billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
      currentPeriod: { start: '2026-11-14T23:00:00.000Z', end: '2026-12-14T23:00:00.000Z' },
    });
    const stored = await gw.admin.inject({
      method: 'POST',
      url: '/admin/customers',
      headers: auth,
      payload: { name: 'Acme stored', plan: 'free' },
    });
    const ids = async (query: string) =>
      (await gw.admin.inject({ url: `/admin/customers${query}`, headers: auth }))
        .json()
        .items.map((c: { id: string }) => c.id);
    expect(await ids('')).toEqual([stored.json().id, 'cus_fromfile']);
    expect(await ids('?limit=1&name=acme%20f')).toEqual(['cus_fromfile']);
    expect(await ids('?externalId=ext-file')).toEqual(['cus_fromfile']);
    const first = (await gw.admin.inject({ url: '/admin/customers?limit=1', headers: auth })).json();
    const second = await gw.admin.inject({ url: `/admin/customers?limit=1&after=${first.next}`, headers: auth });
    expect(second.json()).toMatchObject({ items: [{ id: 'cus_fromfile' }], next: null });
  });

  it("take keys through the admin API, on the customer's plan, and their keys in the file are theirs", async () => {
    const gw = await start();
    const made = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: auth,
      payload: { customerId: 'cus_fromfile', name: 'ci' },
    });
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json()).toMatchObject({ plan: 'pro', customerId: 'cus_fromfile' });
    const listed = await gw.admin.inject({ url: '/admin/keys?customerId=cus_fromfile', headers: auth });
    expect(listed.json().items.map((k: { id: string }) => k.id)).toEqual([made.json().id, 'key_filed']);
  });

  it('are changed and deleted in the file only: 409, nothing revoked', async () => {
    const gw = await start();
    const made = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: auth,
      payload: { customerId: 'cus_fromfile' },
    });
    const patch = await gw.admin.inject({
      method: 'PATCH',
      url: '/admin/customers/cus_fromfile',
      headers: auth,
      payload: { name: 'renamed' },
    });
    expectError(patch, 409, 'conflict');
    expect(patch.json().message).toMatch(/API_KEYS_FILE/);
    const del = await gw.admin.inject({
      method: 'DELETE',
      url: '/admin/customers/cus_fromfile?revokeKeys=true',
      headers: auth,
    });
    expectError(del, 409, 'conflict');
    const key = await gw.admin.inject({ url: `/admin/keys/${made.json().id}`, headers: auth });
    expect(key.json()).not.toHaveProperty('revokedAt');
    // A stored customer may not take a file customer's externalId.
    const taken = await gw.admin.inject({
      method: 'POST',
      url: '/admin/customers',
      headers: auth,
      payload: { name: 'Copy', plan: 'pro', externalId: 'ext-file' },
    });
    expectError(taken, 409, 'conflict');
  });

  it('without billing in the file are billed from day 1 in UTC, created when the gateway loaded the file', async () => {
    const bare = join(dir, 'bare.json');
    await writeFile(bare, JSON.stringify({ keys: [], customers: [{ id: 'cus_bare', name: 'Bare', plan: 'free' }] }));
    const loadedAt = Date.parse('2026-11-26T10:00:00.000Z');
    let now = loadedAt;
    const gw = await gateways.start({ redisUrl: null, now: () => now, env: { API_KEYS_FILE: bare } });
    now += 60_000;
    const shown = await gw.admin.inject({ url: '/admin/customers/cus_bare', headers: auth });
    expect(shown.statusCode, shown.body).toBe(200);
    expect(shown.json()).toStrictEqual({
      id: 'cus_bare',
      name: 'Bare',
      plan: 'free',
      limits: expect.any(Object),
      billing: { anchorDay: 1, timeZone: 'UTC' },
      currentPeriod: { start: '2026-11-01T00:00:00.000Z', end: '2026-12-01T00:00:00.000Z' },
      createdAt: new Date(loadedAt).toISOString(),
    });
  });

  it('stop the gateway from starting when a key names a customer the file lacks, every problem listed', async () => {
    const bad = join(dir, 'bad.json');
    await writeFile(
      bad,
      JSON.stringify({
        keys: [
          { ...FILE.keys[0], customerId: 'cus_gone' },
          { id: 'key_two', plan: 'free', sha256: hashApiKey('two'), customerId: 'cus_fromfile' },
        ],
        customers: FILE.customers,
      }),
    );
    expect(() => loadConfig({ API_KEYS_FILE: bad })).toThrow(
      /entry 0 \(key_filed\): customerId cus_gone is not among the file's customers[\s\S]*entry 1 \(key_two\): plan: keys of customer cus_fromfile are on its plan \(pro\)/,
    );
  });
});
