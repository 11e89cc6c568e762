import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { useEchoUpstream } from '../support/admin.js';
import { adminEnv, runCli } from '../support/cli.js';
import { ADMIN_TOKEN, bearer, startGateway, type TestGateway } from '../support/helpers.js';

/**
 * `keys customers invoice ID [--previous] [--csv]`: a customer's invoice preview, and `keys invoice
 * ID` a lone key's (embedded mode).
 */
const upstream = useEchoUpstream();
let gw: TestGateway;
let env: Record<string, string>;
let clock = Date.parse('2026-02-20T12:00:00Z');

beforeAll(async () => {
  const path = join(mkdtempSync(join(tmpdir(), 'invoice-cli-')), 'plans.json');
  const price = { currency: 'EUR', base: 4900, includedUnits: 2, unitPrice: 50, per: 1000 };
  writeFileSync(path, JSON.stringify({ plans: { metered: { windows: { minute: 100 }, price } } }));
  gw = await startGateway({ redisUrl: null, upstream: upstream.url, now: () => clock, env: { PLANS_FILE: path } });
  env = await adminEnv(gw);
});
afterAll(async () => {
  await gw?.close();
});

const admin = (method: string, url: string, payload?: object) =>
  gw.admin.inject({ method: method as 'GET', url, headers: bearer(ADMIN_TOKEN), ...(payload ? { payload } : {}) });

// Four CLI runs, each a Node start.
it('prints the lines and total of the current or previous period, as text, JSON or CSV', {
  timeout: 60_000,
}, async () => {
  const id: string = (await admin('POST', '/admin/customers', { name: 'Acme', plan: 'metered' })).json().id;
  const key: string = (await admin('POST', '/admin/keys', { customerId: id, name: 'prod' })).json().key;
  for (let i = 0; i < 3; i++) {
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
  }
  clock = Date.parse('2026-03-02T12:00:00Z');

  const text = await runCli(['customers', 'invoice', id, '--previous'], env);
  expect(text.code, text.stderr).toBe(0);
  expect(text.stdout).toMatch(/previous period 2026-02-01T00:00:00.000Z to 2026-03-01T00:00:00.000Z/);
  expect(text.stdout).toMatch(/overage\s+.*\s1\s+1000\s+0\.50 EUR/);
  expect(text.stdout).toMatch(/total\s+49\.50 EUR/);

  const json = await runCli(['customers', 'invoice', id, '--previous', '--json'], env);
  expect(JSON.parse(json.stdout)).toMatchObject({ id, period: 'previous', units: 3, total: 4950, creditsUsed: null });

  const csv = await runCli(['customers', 'invoice', id, '--csv'], env);
  expect(csv.code, csv.stderr).toBe(0);
  expect(csv.stdout.split('\r\n')).toEqual([
    'line,description,quantity,billed_units,unit_price,per,amount,currency',
    'base,Base fee for the billing period,1,,,,4900,EUR',
    'included,Units included (2),0,,,,0,EUR',
    'overage,"Units beyond those included, 50 per 1000 started",0,0,50,1000,0,EUR',
    'total,Total,,,,,4900,EUR',
    '',
  ]);

  const none = await runCli(['customers', 'invoice', 'cus_nobody'], env);
  expect(none.code).toBe(1);
  expect(none.stderr).toMatch(/404|No customer/);
});

// Three CLI runs.
it('prints a lone key’s preview of the previous UTC month, refuses a customer’s key naming the customer’s', {
  timeout: 60_000,
}, async () => {
  clock = Date.parse('2026-03-20T12:00:00Z');
  const created = (await admin('POST', '/admin/keys', { plan: 'metered', name: 'solo' })).json();
  for (let i = 0; i < 4; i++) {
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) })).statusCode).toBe(200);
  }
  clock = Date.parse('2026-04-01T08:00:00Z');

  const text = await runCli(['invoice', created.id, '--previous'], env);
  expect(text.code, text.stderr).toBe(0);
  expect(text.stdout).toMatch(
    /\(solo\), plan metered: previous period 2026-03-01T00:00:00.000Z to 2026-04-01T00:00:00.000Z/,
  );
  expect(text.stdout).toMatch(/total\s+49\.50 EUR/);

  const csv = await runCli(['invoice', created.id, '--previous', '--csv'], env);
  expect(csv.stdout.split('\r\n')).toEqual([
    'line,description,quantity,billed_units,unit_price,per,amount,currency',
    'base,Base fee for the billing period,1,,,,4900,EUR',
    'included,Units included (2),2,,,,0,EUR',
    'overage,"Units beyond those included, 50 per 1000 started",2,1000,50,1000,50,EUR',
    'total,Total,,,,,4950,EUR',
    '',
  ]);

  const customer: string = (await admin('POST', '/admin/customers', { name: 'Initech', plan: 'metered' })).json().id;
  const owned: string = (await admin('POST', '/admin/keys', { customerId: customer })).json().id;
  const refused = await runCli(['invoice', owned], env);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`/admin/customers/${customer}/invoice-preview`);
});
