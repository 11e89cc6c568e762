import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminEnv, runCli } from '../support/cli.js';
import { startGateway, type TestGateway } from '../support/helpers.js';

/** `keys customers …` and `keys create --customer` against a gateway's admin listener (embedded mode). */
let gw: TestGateway;
let env: Record<string, string>;
beforeAll(async () => {
  gw = await startGateway({ redisUrl: null });
  env = await adminEnv(gw);
});
afterAll(async () => {
  await gw?.close();
});

const keys = (args: string[]) => runCli(args, env);

// Nine CLI runs, each a Node start.
it('creates, finds, changes and deletes a customer, and makes keys that belong to it', {
  timeout: 60_000,
}, async () => {
  const created = await keys([
    'customers',
    'create',
    '--name',
    'Acme Corp',
    '--plan',
    'pro',
    '--per-minute',
    '500',
    '--billing-anchor-day',
    '15',
    '--time-zone',
    'Europe/Paris',
    '--external-id',
    'cus_Stripe9',
    '--json',
  ]);
  expect(created.code, created.stderr).toBe(0);
  const customer = JSON.parse(created.stdout);
  expect(customer).toMatchObject({
    plan: 'pro',
    ownLimits: { perMinute: 500 },
    billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
    externalId: 'cus_Stripe9',
  });

  const listed = await keys(['customers', 'list', '--external-id', 'cus_Stripe9']);
  expect(listed.stdout).toMatch(
    new RegExp(`^${customer.id}\\s+Acme Corp\\s+pro\\s+15 Europe/Paris\\s+cus_Stripe9`, 'm'),
  );

  const key = await keys(['create', '--customer', customer.id, '--name', 'ci', '--json']);
  expect(key.code, key.stderr).toBe(0);
  expect(JSON.parse(key.stdout)).toMatchObject({ plan: 'pro', customerId: customer.id });

  const shown = await keys(['customers', 'show', customer.id]);
  expect(shown.stdout).toContain('from day 15, Europe/Paris');

  const updated = await keys(['customers', 'update', customer.id, '--plan-limits', '--json']);
  expect(JSON.parse(updated.stdout)).not.toHaveProperty('ownLimits');

  const refused = await keys(['customers', 'delete', customer.id]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('revokeKeys=true');
  const deleted = await keys(['customers', 'delete', customer.id, '--revoke-keys']);
  expect(deleted.code, deleted.stderr).toBe(0);
  expect((await keys(['customers', 'list', '--external-id', 'cus_Stripe9'])).stdout).toBe('no customers\n');
});

it.each([
  [['customers', 'create', '--name', 'A'], '--name and --plan'],
  [['customers', 'create', '--name', 'A', '--plan', 'pro', '--billing-anchor-day', '29'], '--billing-anchor-day'],
  [['customers', 'create', '--name', 'A', '--plan', 'pro', '--time-zone', 'Mars/Base'], '--time-zone'],
  [['customers', 'update', 'cus_x'], 'nothing to change'],
  [['customers', 'frobnicate'], 'unknown customers action'],
  [['create', '--customer', 'cus_x', '--file', '/tmp/nowhere.json'], 'API_KEYS_FILE holds no customers'],
  [['create', '--name', 'x'], '--plan (or --customer)'],
])('%j exits 2 naming %s, with the usage', async (args, message) => {
  const res = await keys(args);
  expect(res.code, res.stderr).toBe(2);
  expect(res.stderr).toContain(message);
  expect(res.stderr).toContain('usage: npm run -s keys --');
});
