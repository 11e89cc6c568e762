import { expect, it } from 'vitest';
import { useCliGateway } from '../support/cli.js';

/** `keys credits ID`: a lone key's balance, a top-up once per key, its ledger (embedded mode). */
const cli = useCliGateway();

// Seven CLI runs, each a Node start.
it('tops up a lone key once per Idempotency-Key, shows its balance and ledger; a customer’s key is refused', {
  timeout: 60_000,
}, async () => {
  const id: string = (await cli.admin('POST', '/admin/keys', { plan: 'pro' })).json().id;
  await cli.admin('PATCH', `/admin/keys/${id}`, { credits: { refill: { amount: 100, every: 'period' } } });
  const add = ['credits', id, '--add', '50', '--reason', 'order 8', '--idempotency-key', 'order-8'];
  const first = await cli.run(add);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toBe(`topup of 50 for ${id} (ref ${first.stdout.match(/ref (crd_[\w-]+)/)?.[1]})\n`);
  const again = await cli.run(add);
  expect(again.stdout).toBe(`${first.stdout}replayed: this top-up was already applied; nothing was added\n`);
  // A new key is a new top-up, not a replay.
  const grant = await cli.run(['credits', id, '--add', '5', '--reason', 'r', '--type', 'grant', '--json']);
  expect(JSON.parse(grant.stdout)).toMatchObject({ type: 'grant', amount: 5, replayed: false });

  const balance = await cli.run(['credits', id]);
  // The refill (100) applied at the top-up, then 50 once, then the grant of 5.
  expect(balance.stdout).toMatch(new RegExp(`key:\\s+${id}\\n`));
  expect(balance.stdout).toMatch(/balance:\s+155\n/);
  expect(balance.stdout).toMatch(/refill:\s+up to 100 each period/);
  const ledger = await cli.run(['credits', id, '--ledger']);
  expect(ledger.stdout).toMatch(/topup\s+50 .*order 8/);
  expect(ledger.stdout).toMatch(/refill\s+100/);

  const customer: string = (
    await cli.admin('POST', '/admin/customers', { name: 'Acme', plan: 'pro', credits: {} })
  ).json().id;
  const owned: string = (await cli.admin('POST', '/admin/keys', { customerId: customer })).json().id;
  const refused = await cli.run(['credits', owned]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`/admin/customers/${customer}/credits`);

  const bad = await cli.run(['credits', id, '--add', '5']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/credits --add needs --reason/);
});

// Three CLI runs, each a Node start.
it('update --plan-credits and customers update --plan-credits drop terms of their own: the plan’s apply again', {
  timeout: 60_000,
}, async () => {
  const id: string = (await cli.admin('POST', '/admin/keys', { plan: 'pro' })).json().id;
  await cli.admin('PATCH', `/admin/keys/${id}`, { credits: { refill: { amount: 100, every: 'period' } } });
  const key = await cli.run(['update', id, '--plan-credits']);
  expect(key.code, key.stderr).toBe(0);
  // The spec's plans have no credit terms: none are in force once its own are dropped.
  expect(key.stdout).toMatch(/credits:\s+none\n/);
  expect((await cli.admin('GET', `/admin/keys/${id}`)).json()).not.toHaveProperty('credits');

  const customer: string = (
    await cli.admin('POST', '/admin/customers', { name: 'Acme', plan: 'pro', credits: {} })
  ).json().id;
  const shown = await cli.run(['customers', 'show', customer]);
  expect(shown.stdout).toMatch(/credits:\s+no refill\n/);
  const updated = await cli.run(['customers', 'update', customer, '--plan-credits', '--json']);
  expect(updated.code, updated.stderr).toBe(0);
  expect(JSON.parse(updated.stdout)).not.toHaveProperty('credits');
});

// Thirteen CLI runs, each a Node start.
it('update and customers create/update set credit terms: a refill, by hand only, none; mistakes exit 2', {
  timeout: 90_000,
}, async () => {
  const id: string = (await cli.admin('POST', '/admin/keys', { plan: 'pro' })).json().id;
  const key = async () => (await cli.admin('GET', `/admin/keys/${id}`)).json();
  const daily = await cli.run(['update', id, '--refill', '500', '--refill-every', 'day']);
  expect(daily.code, daily.stderr).toBe(0);
  expect(daily.stdout).toMatch(/credits:\s+up to 500 each day\n/);
  expect(await key()).toMatchObject({ credits: { refill: { amount: 500, every: 'day' } } });
  expect((await cli.run(['update', id, '--refill', '70'])).stdout).toMatch(/credits:\s+up to 70 each period\n/);
  expect((await cli.run(['update', id, '--credits-by-hand'])).stdout).toMatch(/credits:\s+no refill\n/);
  expect((await key()).credits).toEqual({});
  expect((await cli.run(['update', id, '--no-credits'])).stdout).toMatch(/credits:\s+none\n/);
  expect(await key()).toMatchObject({ ownCredits: null });
  expect(await key()).not.toHaveProperty('credits');

  const made = await cli.run(['customers', 'create', '--name', 'Acme', '--plan', 'pro', '--refill', '100', '--json']);
  expect(made.code, made.stderr).toBe(0);
  const customer = JSON.parse(made.stdout) as { id: string; credits: unknown };
  expect(customer.credits).toEqual({ refill: { amount: 100, every: 'period' } });
  const off = await cli.run(['customers', 'update', customer.id, '--no-credits', '--json']);
  expect(JSON.parse(off.stdout)).toMatchObject({ id: customer.id, ownCredits: null });
  expect((await cli.admin('GET', `/admin/customers/${customer.id}`)).json()).not.toHaveProperty('credits');

  for (const [args, message] of [
    [
      ['update', id, '--refill', '5', '--no-credits'],
      /give one of --refill, --credits-by-hand, --no-credits or --plan-credits/,
    ],
    [['update', id, '--refill-every', 'day'], /--refill-every needs --refill N/],
    [['update', id, '--refill', '0'], /--refill must be a whole number of credits from 1/],
    [['update', id, '--refill', '5', '--refill-every', 'week'], /--refill-every must be period/],
    [['customers', 'create', '--name', 'B', '--plan', 'pro', '--no-credits'], /give it to update/],
    [['create', '--plan', 'pro', '--refill', '5'], /--refill: a key is made on its plan's credit terms/],
  ] as const) {
    const run = await cli.run([...args]);
    expect(run.code, args.join(' ')).toBe(2);
    expect(run.stderr, args.join(' ')).toMatch(message);
  }
});
