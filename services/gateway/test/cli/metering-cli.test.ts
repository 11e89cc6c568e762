import { afterAll, beforeAll, expect, it } from 'vitest';
import { HOUR_MS, hourStart } from '../../src/usage/usage-history.js';
import { adminEnv, runCli } from '../support/cli.js';
import { ADMIN_TOKEN, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';

/** `keys metering` against a gateway's admin listener (embedded mode), after real traffic and a closing pass. */

let upstream: Awaited<ReturnType<typeof startEchoUpstream>>;
let gw: TestGateway;
let env: Record<string, string>;
let at = Date.now();
const hour = hourStart(at);
const ids: Record<string, string> = {};

const post = async (url: string, payload: object) => {
  const res = await gw.admin.inject({ method: 'POST', url, headers: bearer(ADMIN_TOKEN), payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: string; key: string };
};

beforeAll(async () => {
  upstream = await startEchoUpstream();
  gw = await startGateway({ redisUrl: null, upstream: upstream.url, now: () => at });
  env = await adminEnv(gw);
  const customer = await post('/admin/customers', { name: 'Acme', plan: 'pro', externalId: 'cus_StripeAcme01' });
  const key = await post('/admin/keys', { customerId: customer.id });
  const lones = [await post('/admin/keys', { plan: 'pro' }), await post('/admin/keys', { plan: 'pro' })];
  const send = (k: string) => gw.app.inject({ method: 'GET', url: '/v1/pets', headers: bearer(k) });
  await Promise.all([send(key.key), send(key.key), send(key.key), ...lones.map((k) => send(k.key))]);
  Object.assign(ids, { customer: customer.id, lone1: lones[0]?.id, lone2: lones[1]?.id });
  at = hour + HOUR_MS + 300_000;
  await gw.deps.history.flush();
  expect(await gw.deps.meteringCloser.closeDue()).toHaveLength(3);
});
afterAll(async () => {
  await gw?.close();
  await upstream?.close();
});

const keys = (args: string[]) => runCli(['metering', ...args], env);
const hourText = new Date(hour).toISOString().replace('T', ' ').replace('.000Z', 'Z');

it('prints a page as a table with the cursor to resume from, and the next page from it', async () => {
  const first = await keys(['--limit', '2']);
  expect(first.code, first.stderr).toBe(0);
  const lines = first.stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^SUBJECT\s+HOUR\s+REVISION\s+UNITS\s+DELTA$/);
  expect(lines).toHaveLength(4);
  const cursor = /^next: --after (\S+)$/.exec(lines[3] ?? '')?.[1] ?? '';
  expect(cursor).not.toBe('');
  const rest = await keys(['--after', cursor]);
  expect(rest.code, rest.stderr).toBe(0);
  const rows = [...lines.slice(1, 3), ...rest.stdout.split('\n').slice(1, 2)].map((l) => l.split(/\s{2,}/));
  expect(rows.sort()).toEqual(
    [
      [ids.customer, hourText, '1', '3', '3'],
      [ids.lone1, hourText, '1', '1', '1'],
      [ids.lone2, hourText, '1', '1', '1'],
    ].sort(),
  );
  // Nothing after the last: the same cursor back, to poll again from.
  const last = /next: --after (\S+)/.exec(rest.stdout)?.[1] ?? '';
  expect((await keys(['--after', last])).stdout).toBe(`no events\nnext: --after ${last}\n`);
});

it('walks every page with --all, as JSON lines with --json, and gives the Stripe view', async () => {
  const all = await keys(['--all', '--limit', '1', '--json']);
  expect(all.code, all.stderr).toBe(0);
  const events = all.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { subject: string; data: object });
  expect(events.map((e) => e.subject).sort()).toEqual([ids.customer, ids.lone1, ids.lone2].sort());
  expect(events.find((e) => e.subject === ids.customer)?.data).toMatchObject({ units: 3, delta: 3, revision: 1 });

  const text = await keys(['--all', '--limit', '2']);
  expect(text.stdout.split('\n').filter((l) => l.startsWith('SUBJECT'))).toHaveLength(2);
  const subjects = text.stdout.split('\n').map((l) => l.split(' ')[0]);
  expect(subjects.filter((s) => Object.values(ids).includes(s ?? '')).sort()).toEqual(Object.values(ids).sort());

  const stripe = await keys(['--format', 'stripe-meter-events', '--json']);
  const page = JSON.parse(stripe.stdout) as { events: Array<{ identifier: string; payload: { value: string } }> };
  expect(page.events).toEqual([
    expect.objectContaining({ payload: { stripe_customer_id: 'cus_StripeAcme01', value: '3' } }),
  ]);
  const stripeTable = await keys(['--format', 'stripe-meter-events']);
  expect(stripeTable.stdout.split('\n')[1]?.split(/\s{2,}/)).toEqual([ids.customer, hourText, '1', '3']);
});

it('exits 2 with the usage for a bad flag, 1 with the admin API’s message for a cursor it did not give', async () => {
  const badFormat = await keys(['--format', 'xml']);
  expect(badFormat.code).toBe(2);
  expect(badFormat.stderr).toContain('usage: npm run -s keys -- metering [--after CURSOR]');
  expect((await keys(['--limit', '1001'])).code).toBe(2);
  const badCursor = await keys(['--after', 'not-a-cursor']);
  expect(badCursor.code).toBe(1);
  expect(badCursor.stderr).toContain('admin API answered 400');
});
