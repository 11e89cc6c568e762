import { hash } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateApiKey } from '../../src/keys/api-key.js';
import { adminEnv, runCli } from '../support/cli.js';
import { addKey, startGateway, type TestGateway } from '../support/helpers.js';

/** `keys leaks report|list` against a gateway's admin listener (embedded mode). */

let gw: TestGateway;
let env: Record<string, string>;
beforeAll(async () => {
  gw = await startGateway({ redisUrl: null, env: { LEAK_RESPONSE: 'revoke' } });
  env = await adminEnv(gw);
});
afterAll(async () => {
  await gw?.close();
});

const keys = (args: string[]) => runCli(args, env);

it('reports a key by its hash, acts on it, and lists the leak', async () => {
  const { id, key } = await addKey(gw.deps, 'free');
  const reported = await keys(['leaks', 'report', '--sha256', hash('sha256', key, 'hex'), '--source', 'ticket 12']);
  expect(reported.code, reported.stderr).toBe(0);
  expect(reported.stdout).toMatch(new RegExp(`^leak_\\S+: key ${id} revoked\\n$`));
  expect((await gw.deps.keyStore.get(id))?.revokedAt).toBeDefined();

  const listed = await keys(['leaks', 'list']);
  expect(listed.stdout).toMatch(new RegExp(`^leak_\\S+\\s+\\S+ \\S+\\s+${id}\\s+manual\\s+revoked\\s+ticket 12`, 'm'));
  const json = await keys(['leaks', 'list', '--json']);
  expect(JSON.parse(json.stdout).items).toMatchObject([{ keyId: id, response: 'revoke' }]);
});

it('exits 2 with the usage for a mistake, 1 with the admin API’s message for an unknown key', async () => {
  const noSource = await keys(['leaks', 'report', generateApiKey()]);
  expect(noSource.code).toBe(2);
  expect(noSource.stderr).toContain('usage: npm run -s keys -- leaks report');
  expect((await keys(['leaks', 'frobnicate'])).code).toBe(2);
  const unknown = await keys(['leaks', 'report', generateApiKey(), '--source', 'log']);
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toContain('admin API answered 404');
});
