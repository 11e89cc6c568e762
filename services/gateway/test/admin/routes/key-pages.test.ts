import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../../src/keys/api-key.js';
import { auth, expectError } from '../../support/admin.js';
import { startGateway, type TestGateway } from '../../support/helpers.js';

/*
 * GET /admin/keys a page at a time: the cursor, the size, the filters answered by the store, the
 * keys of API_KEYS_FILE merged in list order, and what it refuses (400 in the Error shape).
 */

interface Listed {
  id: string;
  name: string;
  plan: string;
  source: string;
  prefix?: string;
  customerId?: string;
  revokedAt?: string;
}

let gw: TestGateway;
let dir: string;
/** Newest first, as every page lists them. */
const made: Listed[] = [];
let customerId: string;

function list(query: string): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ url: `/admin/keys${query}`, headers: auth });
}

/** Every id a query lists, page after page of `limit` (from after `start`, when given). */
async function walk(query: string, limit: number, start: string | null = null): Promise<string[]> {
  const ids: string[] = [];
  let after: string | null = start;
  do {
    const cursor: string = after === null ? '' : `&after=${encodeURIComponent(after)}`;
    const res = await list(`?limit=${limit}${query}${cursor}`);
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as { items: Listed[]; next: string | null };
    expect(page.items.length).toBeLessThanOrEqual(limit);
    ids.push(...page.items.map((k) => k.id));
    after = page.next;
  } while (after !== null);
  return ids;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'key-pages-'));
  const file = join(dir, 'keys.json');
  await writeFile(
    file,
    JSON.stringify([{ id: 'key_fromfile', name: 'Acme from file', plan: 'pro', sha256: hashApiKey('file secret') }]),
  );
  let now = Date.parse('2026-11-26T10:00:00.000Z');
  // Each request a millisecond later: creation order is list order. The file's key was loaded first.
  gw = await startGateway({ redisUrl: null, now: () => now++, env: { API_KEYS_FILE: file } });
  const customer = await gw.admin.inject({
    method: 'POST',
    url: '/admin/customers',
    headers: auth,
    payload: { name: 'Acme Corp', plan: 'pro' },
  });
  customerId = customer.json().id;
  const bodies = [
    { plan: 'free', name: 'acme prod' },
    { plan: 'business', name: 'Zeta' },
    { customerId, name: 'Acme ci' },
    { plan: 'free', name: 'a.c.m.e' },
    { customerId, name: 'other' },
  ];
  for (const payload of bodies) {
    const res = await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth, payload });
    expect(res.statusCode, res.body).toBe(201);
    const shown = await gw.admin.inject({ url: `/admin/keys/${res.json().id}`, headers: auth });
    made.unshift(shown.json());
  }
  await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${made[0]?.id}`, headers: auth });
});

afterAll(async () => {
  await gw?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('GET /admin/keys', () => {
  const ids = (...indexes: number[]) => indexes.map((i) => made[i]?.id);

  it('answers a page, newest first, with the file key after the stored ones made since it loaded', async () => {
    const res = await list('');
    expect(res.statusCode).toBe(200);
    const page = res.json();
    expect(page.next).toBeNull();
    expect(page.items.map((k: Listed) => k.id)).toEqual([...ids(0, 1, 2, 3, 4), 'key_fromfile']);
    expect(page.items.at(-1)).toMatchObject({ id: 'key_fromfile', source: 'file' });
  });

  it('walks every key once across pages of any size, the file key included', async () => {
    for (const limit of [1, 2, 4, 500]) {
      expect(await walk('', limit)).toEqual([...ids(0, 1, 2, 3, 4), 'key_fromfile']);
    }
  });

  it('narrows in the store by name prefix (any case), plan, customer, shown prefix and state', async () => {
    expect(await walk('&name=ACME', 2)).toEqual([...ids(2, 4), 'key_fromfile']);
    expect(await walk('&name=a.c', 2)).toEqual(ids(1));
    expect(await walk('&plan=free', 1)).toEqual(ids(1, 4));
    expect(await walk(`&customerId=${customerId}`, 1)).toEqual(ids(0, 2));
    expect(await walk(`&customerId=${customerId}&revoked=false`, 1)).toEqual(ids(2));
    expect(await walk('&revoked=true', 5)).toEqual(ids(0));
    const prefix = made[3]?.prefix as string;
    expect(await walk(`&prefix=${prefix}`, 5)).toEqual(ids(3));
    expect(await walk('&name=nobody', 5)).toEqual([]);
  });

  it('does not shift the next page when keys are made between two pages', async () => {
    const first = (await list('?limit=2')).json();
    const res = await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth, payload: { plan: 'free' } });
    const rest = await walk('', 2, first.next);
    expect([...first.items.map((k: Listed) => k.id), ...rest]).toEqual([...ids(0, 1, 2, 3, 4), 'key_fromfile']);
    await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${res.json().id}`, headers: auth });
  });

  it.each([
    ['a cursor it did not make', '?after=not-a-cursor!'],
    ['a cursor of valid characters that is not one', `?after=${Buffer.from('["x","y"]').toString('base64url')}`],
    ['a cursor too long', `?after=${'A'.repeat(201)}`],
    ['an empty cursor', '?after='],
    ['a limit of 0', '?limit=0'],
    ['a limit above 500', '?limit=501'],
    ['a limit that is not a number', '?limit=ten'],
    ['a fractional limit', '?limit=1.5'],
    ['revoked that is not a boolean', '?revoked=maybe'],
    ['a prefix with pattern characters', '?prefix=ask_.*'],
    ['a prefix too long', `?prefix=ask_${'a'.repeat(10)}`],
    ['an empty name', '?name='],
    ['a name too long', `?name=${'a'.repeat(101)}`],
    ['an empty plan', '?plan='],
    ['a customerId too long', `?customerId=cus_${'a'.repeat(64)}`],
  ])('refuses %s with 400 invalid_request', async (_label, query) => {
    const res = await list(query);
    expectError(res, 400, 'invalid_request');
  });

  it('finds nothing, rather than everything, for names and prefixes full of pattern syntax', async () => {
    for (const name of ['.*', '^a', '(', '[a-z]', '\\', '$where']) {
      const res = await list(`?name=${encodeURIComponent(name)}`);
      expect(res.statusCode, name).toBe(200);
      expect(res.json()).toEqual({ items: [], next: null });
    }
  });
});
