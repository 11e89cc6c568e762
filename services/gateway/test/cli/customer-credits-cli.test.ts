import { expect, it } from 'vitest';
import { useCliGateway } from '../support/cli.js';

/** `keys customers credits ID`: a customer's balance, a top-up once per key, its ledger (embedded mode). */
const cli = useCliGateway();

// Six CLI runs, each a Node start.
it('tops up once per Idempotency-Key, shows the balance and pages the ledger', { timeout: 60_000 }, async () => {
  const res = await cli.admin('POST', '/admin/customers', {
    name: 'Acme',
    plan: 'pro',
    credits: { refill: { amount: 100, every: 'period' } },
  });
  const id: string = res.json().id;
  const add = ['customers', 'credits', id, '--add', '50', '--reason', 'order 7', '--idempotency-key', 'order-7'];
  const first = await cli.run(add);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toMatch(/^topup of 50 for cus_\S+ \(ref crd_[\w-]+\)\n$/);
  // The same Idempotency-Key again: the first answer again, said to be a replay.
  const again = await cli.run(add);
  expect(again.code, again.stderr).toBe(0);
  expect(again.stdout).toBe(`${first.stdout}replayed: this top-up was already applied; nothing was added\n`);
  const json = await cli.run([...add, '--json']);
  expect(JSON.parse(json.stdout)).toMatchObject({ amount: 50, type: 'topup', replayed: true });

  const balance = await cli.run(['customers', 'credits', id, '--json']);
  // The refill (100) applied at the top-up, then 50 once.
  expect(JSON.parse(balance.stdout)).toMatchObject({ id, balance: 150 });
  const ledger = await cli.run(['customers', 'credits', id, '--ledger']);
  expect(ledger.stdout).toMatch(/topup\s+50 .*order 7/);
  expect(ledger.stdout).toMatch(/refill\s+100/);

  const bad = await cli.run(['customers', 'credits', id, '--add', 'lots', '--reason', 'x']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/--add/);
});
