import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminEnv, runCli } from '../support/cli.js';
import { ADMIN_TOKEN, bearer, startGateway, type TestGateway } from '../support/helpers.js';

/** `keys customers credits ID`: a customer's balance, a top-up once per key, its ledger (embedded mode). */
let gw: TestGateway;
let env: Record<string, string>;
beforeAll(async () => {
  gw = await startGateway({ redisUrl: null });
  env = await adminEnv(gw);
});
afterAll(async () => {
  await gw?.close();
});

// Five CLI runs, each a Node start.
it('tops up once per Idempotency-Key, shows the balance and pages the ledger', { timeout: 60_000 }, async () => {
  const res = await gw.admin.inject({
    method: 'POST',
    url: '/admin/customers',
    headers: bearer(ADMIN_TOKEN),
    payload: { name: 'Acme', plan: 'pro', credits: { refill: { amount: 100, every: 'period' } } },
  });
  const id: string = res.json().id;
  const add = ['customers', 'credits', id, '--add', '50', '--reason', 'order 7', '--idempotency-key', 'order-7'];
  const first = await runCli(add, env);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toMatch(/^topup of 50 for cus_/);
  expect((await runCli(add, env)).code).toBe(0);

  const balance = await runCli(['customers', 'credits', id, '--json'], env);
  // The refill (100) applied at the top-up, then 50 once.
  expect(JSON.parse(balance.stdout)).toMatchObject({ id, balance: 150 });
  const ledger = await runCli(['customers', 'credits', id, '--ledger'], env);
  expect(ledger.stdout).toMatch(/topup\s+50 .*order 7/);
  expect(ledger.stdout).toMatch(/refill\s+100/);

  const bad = await runCli(['customers', 'credits', id, '--add', 'lots', '--reason', 'x'], env);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/--add/);
});
