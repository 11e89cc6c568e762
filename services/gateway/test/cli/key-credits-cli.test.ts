import { expect, it } from 'vitest';
import { useCliGateway } from '../support/cli.js';

/** `keys credits ID`: a lone key's balance, a top-up once per key, its ledger (embedded mode). */
const cli = useCliGateway();

// Six CLI runs, each a Node start.
it('tops up a lone key once per Idempotency-Key, shows its balance and ledger; a customer’s key is refused', {
  timeout: 60_000,
}, async () => {
  const id: string = (await cli.admin('POST', '/admin/keys', { plan: 'pro' })).json().id;
  await cli.admin('PATCH', `/admin/keys/${id}`, { credits: { refill: { amount: 100, every: 'period' } } });
  const add = ['credits', id, '--add', '50', '--reason', 'order 8', '--idempotency-key', 'order-8'];
  const first = await cli.run(add);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toBe(`topup of 50 for ${id} (ref ${first.stdout.match(/ref (crd_[\w-]+)/)?.[1]})\n`);
  expect((await cli.run(add)).code).toBe(0);

  const balance = await cli.run(['credits', id]);
  // The refill (100) applied at the top-up, then 50 once.
  expect(balance.stdout).toMatch(new RegExp(`key:\\s+${id}\\n`));
  expect(balance.stdout).toMatch(/balance:\s+150\n/);
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
