import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminEnv, runCli } from '../support/cli.js';
import { ADMIN_TOKEN, bearer, startGateway, type TestGateway } from '../support/helpers.js';

/** `keys customers usage ID`: a customer's history through the admin API (embedded mode, a fixed clock). */
let gw: TestGateway;
let env: Record<string, string>;
const NOW = Date.parse('2026-10-26T10:00:00Z');
beforeAll(async () => {
  gw = await startGateway({ redisUrl: null, now: () => NOW });
  env = await adminEnv(gw);
});
afterAll(async () => {
  await gw?.close();
});

// Four CLI runs, each a Node start.
it('prints a customer’s local days as a table, as JSON and as the admin API’s CSV', { timeout: 60_000 }, async () => {
  const res = await gw.admin.inject({
    method: 'POST',
    url: '/admin/customers',
    headers: bearer(ADMIN_TOKEN),
    payload: { name: 'Acme', plan: 'pro', billing: { timeZone: 'Europe/Paris' } },
  });
  const id: string = res.json().id;
  // 25 October in Paris: 22:00 UTC on the 24th to 23:00 UTC on the 25th (clocks fall back).
  gw.deps.history.count(id, 'admitted', 2, Date.parse('2026-10-25T22:30:00Z'));
  const args = ['customers', 'usage', id, '--granularity', 'day', '--from', '2026-10-25', '--to', '2026-10-25'];

  const json = await runCli([...args, '--json'], env);
  expect(json.code, json.stderr).toBe(0);
  expect(JSON.parse(json.stdout).series).toEqual([
    expect.objectContaining({
      start: '2026-10-24T22:00:00.000Z',
      end: '2026-10-25T23:00:00.000Z',
      admitted: 1,
      units: 2,
    }),
  ]);

  const csv = await runCli([...args, '--csv'], env);
  expect(csv.stdout).toBe(
    (
      await gw.admin.inject({
        url: `/admin/customers/${id}/usage/history?granularity=day&from=2026-10-25&to=2026-10-25&format=csv`,
        headers: bearer(ADMIN_TOKEN),
      })
    ).body,
  );

  const text = await runCli(args, env);
  expect(text.stdout).toMatch(/by day, Europe\/Paris/);
  expect(text.stdout).toMatch(/2026-10-24T22:00:00.000Z\s+2026-10-25T23:00:00.000Z\s+1\s+0\s+0\s+2\s+0/);
  expect(text.stdout).toMatch(/total: 1 admitted \(2 units\)/);

  const bad = await runCli(['customers', 'usage', id, '--granularity', 'week'], env);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/granularity/);
});
