import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/keys/api-key.js';
import { expectError } from '../support/admin.js';
import { type TestGateway, useGateways } from '../support/helpers.js';
import { admin, signIn } from './support.js';

/*
 * A customer's keys from API_KEYS_FILE: the portal shows them (read-only, marked as from the file),
 * they count against the plan's maxKeys, and a change of one, through the portal or the admin
 * API, is 409 saying the key is managed in a file, never 404.
 */

const gateways = useGateways();
let dir: string;
let file: string;

const fileKey = (id: string, customerId: string) => ({
  id,
  name: id,
  plan: 'free',
  sha256: hashApiKey(id),
  customerId,
});
const FILE = {
  keys: [fileKey('key_file_a', 'cus_file'), fileKey('key_file_b', 'cus_file'), fileKey('key_file_x', 'cus_other')],
  customers: [
    { id: 'cus_file', name: 'Filed', plan: 'free' },
    { id: 'cus_other', name: 'Other', plan: 'free' },
  ],
};
/** The free plan's maxKeys (plans.ts DEFAULT_MAX_KEYS). */
const MAX = 5;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'portal-file-keys-'));
  file = join(dir, 'keys.json');
  await writeFile(file, JSON.stringify(FILE));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const start = (): Promise<TestGateway> => gateways.start({ redisUrl: null, env: { API_KEYS_FILE: file } });

describe("a customer's keys from API_KEYS_FILE in the portal", () => {
  it('are listed as from the file, and count against maxKeys', async () => {
    const gw = await start();
    const browser = await signIn(gw, 'cus_file');
    const listed = (await browser.get('/portal/api/keys')).json().items as Array<{ id: string; source: string }>;
    expect(listed.map((k) => [k.id, k.source]).sort()).toEqual([
      ['key_file_a', 'file'],
      ['key_file_b', 'file'],
    ]);
    const answers: number[] = [];
    for (let i = 0; i < MAX; i++)
      answers.push((await browser.send('POST', '/portal/api/keys', { name: `k${i}` })).statusCode);
    expect(answers).toEqual([201, 201, 201, 409, 409]);
    expect((await browser.get('/portal/api/keys')).json().items).toHaveLength(MAX);
  });

  it.each([
    ['rotate', 'POST', '/rotate', {}],
    ['change', 'PATCH', '', { scopes: ['pets:read'] }],
    ['revoke', 'DELETE', '', undefined],
  ] as const)('%s of one is 409 "managed in a file"; of another customer’s, 404', async (doing, method, tail, body) => {
    const gw = await start();
    const browser = await signIn(gw, 'cus_file');
    const res = await browser.send(method, `/portal/api/keys/key_file_a${tail}`, body);
    expectError(res, 409, 'conflict');
    expect(res.json().message).toBe(
      `Key key_file_a is managed in a file by your provider: ask them to ${doing} it (the portal cannot)`,
    );
    expectError(await browser.send(method, `/portal/api/keys/key_file_x${tail}`, body), 404, 'not_found');
    // Still there, unchanged.
    const keys = (await browser.get('/portal/api/keys')).json().items as Array<{ id: string; scopes: string[] }>;
    expect(keys.find((k) => k.id === 'key_file_a')?.scopes).toEqual(['pets:read', 'pets:write']);
  });

  it('its usage history is readable by key', async () => {
    const gw = await start();
    const browser = await signIn(gw, 'cus_file');
    const res = await browser.get('/portal/api/usage/history?keyId=key_file_a&granularity=period');
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('a key from API_KEYS_FILE through the admin API', () => {
  it.each([
    ['DELETE', '/admin/keys/key_file_a', undefined, 'remove'],
    ['PATCH', '/admin/keys/key_file_a', { name: 'new' }, 'change'],
    ['POST', '/admin/keys/key_file_a/rotate', {}, 'rotate'],
  ] as const)('%s %s → 409 "managed in a file"', async (method, url, payload, doing) => {
    const gw = await start();
    const res = await gw.admin.inject({ method, url, headers: admin, ...(payload ? { payload } : {}) });
    expectError(res, 409, 'conflict');
    expect(res.json().message).toBe(
      `Key key_file_a is managed in a file (API_KEYS_FILE): ${doing} it there (npm run keys -- … --file PATH) and roll the gateway`,
    );
  });
});
