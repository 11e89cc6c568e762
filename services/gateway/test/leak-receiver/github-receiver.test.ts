import { generateKeyPairSync, hash, type KeyObject, sign } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { generateApiKey } from '../../src/keys/api-key.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { buildLeakApp, GITHUB_LEAK_PATH } from '../../src/leak-receiver/app.js';
import { addKey, bearer, type TestGateway, useGateways } from '../support/helpers.js';

/**
 * GitHub's secret scanning partner program as GitHub runs it: a keys document with the public
 * half of a P-256 key pair made here, reports signed with the private half (SHA-256, DER,
 * base64), the payload in GitHub's shape.
 */
const gateways = useGateways();
const dir = mkdtempSync(join(tmpdir(), 'leaks-'));
const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const other = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const KEY_ID = 'f9525bf080f75b3506ca1ead061add62b8633a346606dc5fe544e29231c6ee0d';
const keysFile = join(dir, 'secret_scanning.json');
writeFileSync(
  keysFile,
  JSON.stringify({
    public_keys: [{ key_identifier: KEY_ID, key: publicKey.export({ type: 'spki', format: 'pem' }), is_current: true }],
  }),
);

const leakApps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(leakApps.splice(0).map((app) => app.close()));
});

let clock = Date.now();
const now = () => clock;

/** Two replicas sharing one Redis and one key store (standing in for MongoDB), on one clock. */
async function replicas(env: Record<string, string> = {}) {
  clock = Date.now();
  const keyStore = new MemoryKeyStore();
  const prefix = `lk${Math.random().toString(36).slice(2, 8)}:`;
  const logs: Record<string, unknown>[] = [];
  const options = { keyStore, prefix, now, env: { LEAK_PUBLIC_KEYS: keysFile, REVOCATION_POLL_MS: '60000', ...env } };
  const a = await gateways.start({ ...options, logs });
  const b = await gateways.start(options);
  const leaks = await buildLeakApp(a.config, a.deps);
  leakApps.push(leaks);
  return { a, b, keyStore, leaks, logs };
}

function signed(body: string, key: KeyObject = privateKey): Record<string, string> {
  return {
    'content-type': 'application/json',
    'github-public-key-identifier': KEY_ID,
    'github-public-key-signature': sign('sha256', Buffer.from(body), { key, dsaEncoding: 'der' }).toString('base64'),
  };
}

/** P-256's group order: (r, n - s) verifies wherever (r, s) does. */
const ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** The other valid signature of the same body: DER (r, s) rewritten as (r, n - s). */
function twin(signature: string): string {
  const der = Buffer.from(signature, 'base64');
  const rLength = der[3] as number;
  const r = der.subarray(4, 4 + rLength);
  const s = BigInt(`0x${der.subarray(6 + rLength).toString('hex')}`);
  let hex = (ORDER - s).toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  // A leading 0 keeps the integer positive when its first bit is set.
  const bytes = Buffer.from(/^[89a-f]/.test(hex) ? `00${hex}` : hex, 'hex');
  const body = Buffer.concat([Buffer.from([0x02, r.length]), r, Buffer.from([0x02, bytes.length]), bytes]);
  return Buffer.concat([Buffer.from([0x30, body.length]), body]).toString('base64');
}

function report(token: string): string {
  return JSON.stringify([
    {
      token,
      type: 'animal_store_api_key',
      url: 'https://github.com/octocat/Hello-World/blob/12345600b9cbe38a219f39a9941c9319b600c002/foo/bar.txt',
      source: 'content',
    },
  ]);
}

async function pets(gw: TestGateway, key: string) {
  const res = await gw.app.inject({ method: 'GET', url: '/v1/pets', headers: bearer(key) });
  return { status: res.statusCode, code: (res.json() as { code?: string }).code, headers: res.headers };
}

describe('the secret-scanning receiver (GitHub partner program)', () => {
  it('rotates a reported live key: the leaked secret works for the grace, with a warning, then no replica takes it', async () => {
    const { a, b, keyStore, leaks } = await replicas();
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1000, perDay: 100_000 });
    // B knows the key as it was: only the change's news can make it forget.
    expect((await pets(b, key)).status).toBe(200);
    const body = report(key);
    const res = await leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: signed(body), payload: body });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([
      { token_hash: hash('sha256', key, 'hex'), token_type: 'animal_store_api_key', label: 'true_positive' },
    ]);
    const record = await keyStore.get(id);
    expect(record?.sha256).not.toBe(hash('sha256', key, 'hex'));
    expect(record?.previous?.sha256).toBe(hash('sha256', key, 'hex'));
    expect(Date.parse(record?.previous?.expiresAt ?? '')).toBe(clock + 3_600_000);

    for (const gw of [a, b]) {
      await vi.waitFor(async () => expect((await pets(gw, key)).headers.deprecation).toMatch(/^@\d+$/), {
        timeout: 1_000,
      });
      const during = await pets(gw, key);
      expect(during.status).toBe(200);
      expect(during.headers.link).toBe(`<urn:animal-store:key:${id}>; rel="successor-version"`);
      expect(during.headers.sunset).toBe(new Date(record?.previous?.expiresAt ?? '').toUTCString());
    }
    expect(await a.deps.leaks.list(10)).toMatchObject([
      { keyId: id, reporter: 'github', source: 'content', response: 'rotate', secret: 'current' },
    ]);

    clock += 3_600_000;
    for (const gw of [a, b]) expect(await pets(gw, key)).toMatchObject({ status: 401, code: 'expired_api_key' });
  });

  it('revokes at once when the policy says so: every replica refuses the key within a second', async () => {
    const { a, b, keyStore, leaks } = await replicas({ LEAK_RESPONSE_PLANS: 'enterprise=revoke' });
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1000, perDay: 100_000 });
    expect((await pets(b, key)).status).toBe(200);
    const body = report(key);
    const res = await leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: signed(body), payload: body });
    expect(res.json()).toMatchObject([{ label: 'true_positive' }]);
    expect((await keyStore.get(id))?.revokedAt).toBeDefined();
    for (const gw of [a, b]) {
      await vi.waitFor(async () => expect((await pets(gw, key)).status).toBe(401), { timeout: 1_000 });
    }
    // Revoked now: a second report of it (signed anew) is a false positive.
    const again = JSON.stringify(JSON.parse(body).map((m: object) => ({ ...m, source: 'commit' })));
    const res2 = await leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: signed(again), payload: again });
    expect(res2.json()).toMatchObject([{ label: 'false_positive' }]);
  });

  it('notify leaves the key as it is, and records the leak', async () => {
    const { a, keyStore, leaks } = await replicas({ LEAK_RESPONSE: 'notify' });
    const { id, key } = await addKey(a.deps, 'free');
    const before = await keyStore.get(id);
    const body = report(key);
    const res = await leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: signed(body), payload: body });
    expect(res.json()).toMatchObject([{ label: 'true_positive' }]);
    expect(await keyStore.get(id)).toEqual(before);
    expect(await a.deps.leaks.list(10)).toMatchObject([{ keyId: id, response: 'notify' }]);
  });

  it('answers false_positive for a well-formed token that names no key, in the same shape', async () => {
    const { a, leaks } = await replicas();
    await addKey(a.deps, 'free');
    const token = generateApiKey();
    const body = report(token);
    const res = await leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: signed(body), payload: body });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([
      { token_hash: hash('sha256', token, 'hex'), token_type: 'animal_store_api_key', label: 'false_positive' },
    ]);
    expect(await a.deps.leaks.list(10)).toEqual([]);
  });

  describe('refuses, logs and changes nothing for', () => {
    async function refused(
      send: (leaks: FastifyInstance, key: string) => Promise<{ statusCode: number; json(): unknown }>,
      status: number,
      code: string,
      why: string,
    ) {
      const { a, keyStore, leaks, logs } = await replicas();
      const { id, key } = await addKey(a.deps, 'free');
      const before = await keyStore.get(id);
      const res = await send(leaks, key);
      expect(res.statusCode).toBe(status);
      expect(res.json()).toEqual({ code, message: expect.any(String), status });
      expect(await keyStore.get(id)).toEqual(before);
      expect(await a.deps.leaks.list(10)).toEqual([]);
      expect((await pets(a, key)).status).toBe(200);
      expect(logs).toContainEqual(expect.objectContaining({ leakReport: 'refused', why }));
    }

    it('a signature by another key', async () => {
      await refused(
        (leaks, key) => {
          const body = report(key);
          return leaks.inject({
            method: 'POST',
            url: GITHUB_LEAK_PATH,
            headers: signed(body, other.privateKey),
            payload: body,
          });
        },
        401,
        'unauthorized',
        'signature',
      );
    });

    it('a body other than the one signed', async () => {
      await refused(
        (leaks, key) =>
          leaks.inject({
            method: 'POST',
            url: GITHUB_LEAK_PATH,
            headers: signed(report(generateApiKey())),
            payload: report(key),
          }),
        401,
        'unauthorized',
        'signature',
      );
    });

    it('no signature', async () => {
      await refused(
        (leaks, key) =>
          leaks.inject({
            method: 'POST',
            url: GITHUB_LEAK_PATH,
            headers: { 'content-type': 'application/json' },
            payload: report(key),
          }),
        401,
        'unauthorized',
        'unsigned',
      );
    });

    it('a signed body not in GitHub’s shape', async () => {
      await refused(
        (leaks, key) => {
          const body = JSON.stringify({ token: key, type: 'animal_store_api_key' });
          return leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: signed(body), payload: body });
        },
        400,
        'invalid_request',
        'malformed',
      );
    });
  });

  it('answers 503, changing nothing, while the public keys cannot be read', async () => {
    const { a, keyStore } = await replicas({ LEAK_PUBLIC_KEYS: join(dir, 'missing.json') });
    const leaks = await buildLeakApp(a.config, a.deps);
    leakApps.push(leaks);
    const { id, key } = await addKey(a.deps, 'free');
    const before = await keyStore.get(id);
    const body = report(key);
    const res = await leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: signed(body), payload: body });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'store_unavailable', status: 503 });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await keyStore.get(id)).toEqual(before);
  });

  it('refuses a replay: the same signed report is taken once, on any replica', async () => {
    const { a, b, keyStore, leaks, logs } = await replicas({ LEAK_RESPONSE: 'revoke' });
    const onB = await buildLeakApp(b.config, b.deps);
    leakApps.push(onB);
    const { id, key } = await addKey(a.deps, 'free');
    const body = report(key);
    const headers = signed(body);
    expect((await leaks.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers, payload: body })).statusCode).toBe(
      200,
    );
    const revoked = await keyStore.get(id);
    expect(await a.deps.leaks.list(10)).toHaveLength(1);
    for (const app of [leaks, onB]) {
      const res = await app.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers, payload: body });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: 'conflict', status: 409 });
    }
    // The signature's twin verifies too: a replay is known by its body, not its signature.
    const malleated = { ...headers, 'github-public-key-signature': twin(headers['github-public-key-signature'] ?? '') };
    const again = await onB.inject({ method: 'POST', url: GITHUB_LEAK_PATH, headers: malleated, payload: body });
    expect(again.statusCode).toBe(409);
    expect(await keyStore.get(id)).toEqual(revoked);
    expect(await a.deps.leaks.list(10)).toHaveLength(1);
    expect(logs).toContainEqual(expect.objectContaining({ leakReport: 'refused', why: 'replay' }));
  });
});
