import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@animal-store/tests/support/runtime.js';
import { ServiceProcess } from '@animal-store/tests/support/service-process.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateApiKey } from '../../src/keys/api-key.js';

/** dist/server.js with LEAK_PORT: the receiver on a listener of its own, as deployed. */

let dir: string;
let gateway: ServiceProcess | undefined;
const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gateway-leaks-'));
});
afterAll(async () => {
  await gateway?.stop();
  await rm(dir, { recursive: true, force: true });
});

it('serves the receiver on LEAK_PORT, signatures checked against the keys file', async () => {
  const keys = join(dir, 'keys.json');
  const pem = publicKey.export({ type: 'spki', format: 'pem' });
  await writeFile(keys, JSON.stringify({ public_keys: [{ key_identifier: 'k1', key: pem, is_current: true }] }));
  const port = await freePort();
  gateway = await ServiceProcess.start('gateway', { LEAK_PORT: String(port), LEAK_PUBLIC_KEYS: keys });
  const url = `http://127.0.0.1:${port}/github/secret-scanning`;
  const body = JSON.stringify([{ token: generateApiKey(), type: 'animal_store_api_key', source: 'content' }]);
  const signature = sign('sha256', Buffer.from(body), { key: privateKey, dsaEncoding: 'der' }).toString('base64');
  const headers = { 'content-type': 'application/json', 'github-public-key-identifier': 'k1' };
  const taken = await fetch(url, {
    method: 'POST',
    headers: { ...headers, 'github-public-key-signature': signature },
    body,
  });
  expect(taken.status).toBe(200);
  expect(await taken.json()).toMatchObject([{ label: 'false_positive' }]);
  const unsigned = await fetch(url, { method: 'POST', headers, body });
  expect(unsigned.status).toBe(401);
  // The public listener knows nothing of it.
  expect((await fetch(`${gateway.url}/github/secret-scanning`, { method: 'POST', headers, body })).status).not.toBe(
    200,
  );
});
