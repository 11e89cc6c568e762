import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  [['create', '--customer', 'cus_x', '--file', '/tmp/nowhere.json'], '--customer: no customer "cus_x"'],
  [['customers', 'list', '--file', '/tmp/nowhere.json'], 'with --file, only create'],
  [['customers', 'list', '--limit', '501'], '--limit must be a whole number from 1 to 500'],
  [['create', '--name', 'x'], '--plan (or --customer)'],
])('%j exits 2 naming %s, with the usage', async (args, message) => {
  const res = await keys(args);
  expect(res.code, res.stderr).toBe(2);
  expect(res.stderr).toContain(message);
  expect(res.stderr).toContain('usage: npm run -s keys --');
});

// Five CLI runs.
it('lists customers a page at a time, and every page with --all', { timeout: 60_000 }, async () => {
  for (const name of ['Pager one', 'Pager two', 'Pager three']) {
    const made = await gw.admin.inject({
      method: 'POST',
      url: '/admin/customers',
      headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
      payload: { name, plan: 'free' },
    });
    expect(made.statusCode, made.body).toBe(201);
  }
  // Newest first, as the admin API orders them: customers made in the same millisecond tie, and
  // the API breaks the tie by id, so the expected order is the API's own, asked of it.
  const listed = await gw.admin.inject({
    url: '/admin/customers?name=pager',
    headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
  });
  const order = (listed.json() as { items: Array<{ name: string }> }).items.map((c) => c.name);
  expect([...order].sort()).toEqual(['Pager one', 'Pager three', 'Pager two']);
  const first = await keys(['customers', 'list', '--name', 'pager', '--limit', '2']);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toMatch(new RegExp(`${order[0]}[\\s\\S]*${order[1]}`));
  const cursor = /^more: --after (\S+)$/m.exec(first.stdout)?.[1] as string;
  const second = await keys(['customers', 'list', '--name', 'pager', '--limit', '2', '--after', cursor, '--json']);
  expect(JSON.parse(second.stdout)).toMatchObject({ items: [{ name: order[2] }], next: null });
  const all = await keys(['customers', 'list', '--name', 'pager', '--limit', '1', '--all', '--json']);
  expect(all.code, all.stderr).toBe(0);
  expect(
    all.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line).name),
  ).toEqual(order);
  const bad = await keys(['customers', 'list', '--after', 'not-a-cursor!']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('after:');
});

// Six CLI runs, then a gateway on the file.
it('creates customers and their keys in an API_KEYS_FILE, which a gateway then serves', {
  timeout: 60_000,
}, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'customer-cli-file-'));
  const file = join(dir, 'keys.json');
  try {
    const plain = await runCli(['create', '--plan', 'free', '--file', file, '--json']);
    expect(plain.code, plain.stderr).toBe(0);
    const made = await runCli([
      'customers',
      'create',
      '--name',
      'Filed',
      '--plan',
      'pro',
      '--per-minute',
      '100',
      '--file',
      file,
      '--json',
    ]);
    expect(made.code, made.stderr).toBe(0);
    const customer = JSON.parse(made.stdout);
    expect(customer).toMatchObject({ name: 'Filed', plan: 'pro', ownLimits: { perMinute: 100 } });
    const key = await runCli(['create', '--customer', customer.id, '--name', 'ci', '--file', file, '--json']);
    expect(key.code, key.stderr).toBe(0);
    const created = JSON.parse(key.stdout);
    expect(created).toMatchObject({ plan: 'pro', customerId: customer.id });
    // The customer rule, as through the admin API: its plan, limits no looser than its.
    const looser = await runCli(['create', '--customer', customer.id, '--per-minute', '500', '--file', file]);
    expect(looser.code).toBe(2);
    expect(looser.stderr).toContain('--per-minute (500) cannot exceed customer');
    const moved = await runCli(['update', created.id, '--plan', 'business', '--file', file]);
    expect(moved.code).toBe(2);
    expect(moved.stderr).toContain(`keys of customer ${customer.id} are on its plan (pro)`);
    const written = JSON.parse(await readFile(file, 'utf8'));
    expect(written.customers.map((c: { id: string }) => c.id)).toEqual([customer.id]);
    expect(written.keys).toHaveLength(2);

    const served = await startGateway({ redisUrl: null, env: { API_KEYS_FILE: file } });
    try {
      const headers = { authorization: `Bearer ${env.ADMIN_TOKEN}` };
      const shown = await served.admin.inject({ url: `/admin/customers/${customer.id}`, headers });
      expect(shown.json()).toMatchObject({ id: customer.id, plan: 'pro', limits: { perMinute: 100 } });
      const ok = await served.app.inject({ url: '/v1/pets', headers: { authorization: `Bearer ${created.key}` } });
      expect(ok.statusCode).not.toBe(401);
    } finally {
      await served.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
