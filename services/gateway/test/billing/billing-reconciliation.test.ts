import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { CloudEvent } from 'cloudevents';
import Fastify, { type LightMyRequestResponse } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { expectError } from '../support/admin.js';
import {
  ADMIN_TOKEN,
  bearer,
  connected,
  redisClient,
  redisReady,
  startGateway,
  type TestGateway,
} from '../support/helpers.js';
import { type TestClock, testClockFrom } from '../support/test-clock.js';

/*
 * Billing reconciled end to end: two replicas on one Redis, a customer on a priced plan with a daily
 * refill, a whole billing period on a clock the test moves (a burst over the shared minute window,
 * a day out of credits, hours the pets service cannot serve, a top-up retried with its
 * Idempotency-Key across a Redis crash, the data kept by Redis's append-only file, a failure known
 * after its hour closed). At the end the period's units agree to the unit five ways: what the
 * client saw served, the usage history, the invoice preview, the metering export's closed hours,
 * and the ledger's spend net of the credits given back for what the pets service never served.
 */

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const PRICE = { currency: 'EUR', base: 4900, includedUnits: 300, unitPrice: 25, per: 50 };
const POST_COST = 5;
const REFILL = 40;
/** The customer's month: from the 10th at midnight in Berlin (UTC+1 all period: no DST till 28 March). */
const PERIOD_FROM = Date.parse('2027-02-09T23:00:00Z');
const PERIOD_TO = Date.parse('2027-03-09T23:00:00Z');
const admin = bearer(ADMIN_TOKEN);

/** A Redis that writes every command to its append-only file before answering, in a directory of its own. */
function persistentRedis(dir: string) {
  return (port: number): string[] => [
    ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''],
    ...['--appendonly', 'yes', '--appendfsync', 'always', '--loglevel', 'warning'],
  ];
}

/**
 * The pets service's stand-in: serves every request, or answers 503 while `failing`; while
 * `holding`, it keeps a request until release() and then answers it 503 (a failure known late).
 */
async function startPets() {
  const app = Fastify();
  const held: (() => void)[] = [];
  const pets = {
    url: '',
    app,
    failing: false,
    holding: false,
    held,
    release: () => {
      for (const answer of held.splice(0)) answer();
    },
  };
  const unavailable = { code: 'unavailable', status: 503, message: 'pets cannot serve' };
  app.all('/v1/*', async (request, reply) => {
    if (pets.holding) {
      await new Promise<void>((resolve) => held.push(resolve));
      return reply.code(503).send(unavailable);
    }
    if (pets.failing) return reply.code(503).send(unavailable);
    return request.method === 'POST' ? reply.code(201).send({ id: 1 }) : [];
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  pets.url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return pets;
}

function plansFile(dir: string): string {
  const path = join(dir, 'plans.json');
  const plans = {
    plans: { metered: { windows: { minute: 20 }, price: PRICE } },
    routeCosts: { 'POST /v1/pets': POST_COST },
  };
  writeFileSync(path, JSON.stringify(plans));
  return path;
}

/** What the client saw, counted by what each answer says: the ground truth the gateway's records must meet. */
class Tally {
  served = 0;
  servedUnits = 0;
  /** Served units by route, as routeCosts names routes. */
  readonly routes: Record<string, number> = {};
  failed = 0;
  failedUnits = 0;
  limited = 0;
  exhausted = 0;
  unavailable = 0;

  record(res: LightMyRequestResponse, route: string, cost: number): void {
    const code = res.statusCode >= 400 ? String(res.json().code) : '';
    if (res.statusCode === 200 || res.statusCode === 201) {
      [this.served, this.servedUnits] = [this.served + 1, this.servedUnits + cost];
      this.routes[route] = (this.routes[route] ?? 0) + cost;
    } else if ((res.statusCode === 503 && code === 'unavailable') || code === 'upstream_timeout')
      [this.failed, this.failedUnits] = [this.failed + 1, this.failedUnits + cost];
    else if (res.statusCode === 429 && code === 'rate_limit_exceeded') this.limited++;
    else if (res.statusCode === 402 && code === 'credits_exhausted') this.exhausted++;
    else if (res.statusCode === 503 && code === 'rate_limiter_unavailable') this.unavailable++;
    else throw new Error(`an answer the tally does not expect: ${res.statusCode} ${res.body}`);
  }
}

/** A metering export event (docs/metering.md), as much of it as the reconciliation reads. */
interface UsageEvent {
  id: string;
  subject: string;
  time: string;
  data: { units: number; delta: number; revision: number; routes: Record<string, number> };
}

interface Run {
  clock: TestClock;
  gateways: [TestGateway, TestGateway];
  keys: [string, string];
  keyIds: [string, string];
  customer: string;
  pets: Awaited<ReturnType<typeof startPets>>;
  redis: RedisProcess;
  /** The test's own connection, which ages Redis's TTLs with the clock. */
  aging: Redis;
  firstTopUp?: LightMyRequestResponse;
  /** The metering export as a billing job read it before the crash, and the cursor it resumes from. */
  exported: UsageEvent[];
  cursor: string | null;
  /** Where answers are counted: the period's tally, then the next period's. */
  tally: Tally;
}

const adminCall = (gw: TestGateway, method: string, url: string, payload?: object, headers = {}) =>
  gw.admin.inject({ method: method as 'GET', url, headers: { ...admin, ...headers }, ...(payload ? { payload } : {}) });

async function ok(res: Promise<LightMyRequestResponse>) {
  const answer = await res;
  expect(answer.statusCode, answer.body).toBe(200);
  return answer.json();
}

/** One request through a replica with one of the keys, counted in the run's tally. */
async function send(run: Run, replica: 0 | 1, method: 'GET' | 'POST', key = replica): Promise<LightMyRequestResponse> {
  const headers = { ...bearer(run.keys[key]), 'content-type': 'application/json' };
  const payload = method === 'POST' ? { name: 'Rex', categoryId: 1 } : undefined;
  const res = await run.gateways[replica].app.inject({
    method,
    url: '/v1/pets',
    headers,
    ...(payload ? { payload } : {}),
  });
  run.tally.record(res, `${method} /v1/pets`, method === 'POST' ? POST_COST : 1);
  return res;
}

/** A slot of ordinary use, 10 units at once: 5 reads and a write, both keys through both replicas. */
function slot(run: Run): Promise<LightMyRequestResponse[]> {
  const requests: [0 | 1, 'GET' | 'POST', 0 | 1][] = [
    [0, 'GET', 0],
    [0, 'GET', 1],
    [0, 'GET', 0],
    [1, 'GET', 1],
    [1, 'GET', 0],
    [1, 'POST', 1],
  ];
  return Promise.all(requests.map(([replica, method, key]) => send(run, replica, method, key)));
}

const statuses = (answers: LightMyRequestResponse[]) => answers.map((r) => r.statusCode).sort();

async function balance(gw: TestGateway, customer: string): Promise<number> {
  return (await ok(adminCall(gw, 'GET', `/admin/customers/${customer}/credits`))).balance;
}

const TOP_UP = { amount: 50, reason: 'order 0042' };
const topUp = (run: Run, replica: 0 | 1) =>
  adminCall(run.gateways[replica], 'POST', `/admin/customers/${run.customer}/credits`, TOP_UP, {
    'idempotency-key': 'order-0042',
  });

/** Ordinary use, all of it served. */
async function served(run: Run): Promise<void> {
  expect(statuses(await slot(run))).toEqual([200, 200, 200, 200, 200, 201]);
}

/**
 * Ordinary use while the pets service cannot serve: admitted (windows spent), never billed, and
 * their credits given back: once the replicas' refunds are written, the balance is where it was.
 */
async function unserved(run: Run): Promise<void> {
  const before = await balance(run.gateways[0], run.customer);
  run.pets.failing = true;
  expect(statuses(await slot(run))).toEqual(Array(6).fill(503));
  run.pets.failing = false;
  await closePasses(run);
  expect(await balance(run.gateways[1], run.customer)).toBe(before);
}

/** 24 reads at once over both replicas and keys: the customer's shared minute window (20) admits exactly 20. */
async function burst(run: Run): Promise<void> {
  const answers = await Promise.all(
    Array.from({ length: 24 }, (_, i) => send(run, (i % 2) as 0 | 1, 'GET', (Math.floor(i / 2) % 2) as 0 | 1)),
  );
  expect(statuses(answers)).toEqual([...Array(20).fill(200), ...Array(4).fill(429)]);
}

/**
 * Writes, one a minute, until the day's credits (40, 10 spent this morning) run out: the 7th is a
 * 402 whose Retry-After is the next local midnight's refill.
 */
async function spendTheDay(run: Run): Promise<void> {
  for (let i = 0; i < 6; i++) {
    expect((await send(run, (i % 2) as 0 | 1, 'POST')).statusCode).toBe(201);
    await run.clock.advance(MINUTE);
  }
  const refused = await send(run, 0, 'POST');
  expectError(refused, 402, 'credits_exhausted');
  const midnight = PERIOD_FROM + Math.ceil((run.clock.now() - PERIOD_FROM) / DAY) * DAY;
  expect(refused.headers['retry-after']).toBe(String(Math.ceil((midnight - run.clock.now()) / 1000)));
}

/** The rest of that day: nothing left, every request refused with 402, nothing taken. */
async function outOfCredits(run: Run): Promise<void> {
  expect(statuses(await slot(run))).toEqual(Array(6).fill(402));
}

/** Day 13, after its use: what the day's refill left (40 less 20). */
async function firstTopUp(run: Run): Promise<void> {
  const before = await balance(run.gateways[0], run.customer);
  expect(before).toBe(REFILL - 20);
  run.firstTopUp = await topUp(run, 0);
  expect(run.firstTopUp.statusCode, run.firstTopUp.body).toBe(201);
  expect(await balance(run.gateways[1], run.customer)).toBe(before + TOP_UP.amount);
}

const history = (run: Run, period: 'current' | 'previous') =>
  ok(
    adminCall(
      run.gateways[0],
      'GET',
      `/admin/customers/${run.customer}/usage/history?period=${period}&granularity=period`,
    ),
  );

/**
 * What each replica's timers do in production, which the test's clock does not drive: its
 * history's batch written and its refunds of unserved requests' credits (each within a second, in
 * real time; until then the history counts its upstream failures admitted, and the balance lacks
 * their credits), then a closing pass of the metering
 * export over the hours that ended 5 minutes (METERING_CLOSE_DELAY_MS) ago.
 */
async function closePasses(run: Run): Promise<void> {
  await Promise.all(run.gateways.map((gw) => Promise.all([gw.deps.history.flush(), gw.deps.creditRefunds.flush()])));
  await Promise.all(run.gateways.map((gw) => gw.deps.meteringCloser.closeDue()));
}

/** The export from a cursor to its end, as a billing job pulls it; each event read by the cloudevents SDK. */
async function pull(run: Run, after: string | null): Promise<{ events: UsageEvent[]; next: string | null }> {
  const events: UsageEvent[] = [];
  let cursor = after;
  for (;;) {
    const url = `/admin/metering/events?limit=1000${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`;
    const page = await ok(adminCall(run.gateways[1], 'GET', url));
    for (const event of page.events) expect(new CloudEvent(event).validate()).toBe(true);
    events.push(...page.events);
    if (page.events.length === 0 || page.next === null) return { events, next: cursor };
    cursor = page.next;
  }
}

/**
 * Redis killed (SIGKILL, a crash) and started again on its append-only file: requests meanwhile
 * are refused (failure mode closed) and billed nowhere; after it, the balance is what it was and
 * the top-up retried with its Idempotency-Key through the other replica adds nothing.
 */
async function crashRedis(run: Run): Promise<void> {
  await closePasses(run);
  const before = await balance(run.gateways[0], run.customer);
  ({ events: run.exported, next: run.cursor } = await pull(run, null));
  await run.redis.kill();
  expectError(await send(run, 0, 'GET'), 503, 'rate_limiter_unavailable');
  expectError(await send(run, 1, 'GET'), 503, 'rate_limiter_unavailable');
  await run.redis.restart();
  await vi.waitFor(
    () => expect([...run.gateways.map(redisReady), run.aging.status === 'ready']).toEqual(Array(3).fill(true)),
    { timeout: 10_000, interval: 20 },
  );
  await run.clock.advance(MINUTE);
  expect(await balance(run.gateways[1], run.customer)).toBe(before);
  const again = await topUp(run, 1);
  expect(again.statusCode, again.body).toBe(201);
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(again.json()).toEqual(run.firstTopUp?.json());
  expect(await balance(run.gateways[0], run.customer)).toBe(before);
}

/**
 * A refill brings the balance up to 40, never beyond: with the top-up's 70 on day 13, day 14 spent
 * 20 and day 15 had no refill (50 left, 30 after its use); day 16 is brought up from 30.
 */
function refilledUpTo(expected: number, refill: number | null): Step {
  return async (run) => {
    expect(await balance(run.gateways[1], run.customer)).toBe(expected);
    const newest = (
      await ok(adminCall(run.gateways[0], 'GET', `/admin/customers/${run.customer}/credits/ledger?limit=1`))
    ).items[0];
    if (refill === null) expect(newest.type).not.toBe('refill');
    else
      expect(newest).toMatchObject({
        type: 'refill',
        amount: refill,
        period: `day:${run.clock.now() - ((run.clock.now() - PERIOD_FROM) % DAY)}`,
      });
  };
}

/**
 * A read the pets service holds past its hour's close, then fails (an upstream timeout, if the
 * gateway's 2 s run out first): the export reports the hour with it, then a revision without it.
 */
async function lateFailure(run: Run): Promise<void> {
  run.pets.holding = true;
  const answer = send(run, 1, 'GET', 0);
  await vi.waitFor(() => expect(run.pets.held.length).toBe(1), { timeout: 5_000, interval: 10 });
  run.pets.holding = false;
  const hour = run.clock.now() - (run.clock.now() % HOUR);
  await run.clock.moveTo(hour + HOUR + 6 * MINUTE);
  await closePasses(run);
  run.pets.release();
  expect([503, 504]).toContain((await answer).statusCode);
  await closePasses(run);
  const reports = (await pull(run, run.cursor)).events.filter(
    (e) => e.subject === run.customer && e.time === iso(hour),
  );
  expect(reports.map((e) => [e.data.revision, e.data.units, e.data.delta])).toEqual([
    [1, 1, 1],
    [2, 0, -1],
  ]);
}

type Step = (run: Run) => Promise<void>;
const at = (day: number, hours: number, minutes = 0) => PERIOD_FROM + day * DAY + hours * HOUR + minutes * MINUTE;

/**
 * The period, by local time in Berlin: ordinary use at 08:10 and 15:40 every day (20 units; the
 * daily refill is 40), and on some days something else.
 */
function schedule(): [number, Step][] {
  const steps = new Map<number, Step>();
  for (let day = 0; day < 28; day++) {
    steps.set(at(day, 8, 10), served);
    steps.set(at(day, 15, 40), served);
  }
  steps.set(at(3, 11), burst);
  steps.set(at(6, 12), spendTheDay);
  steps.set(at(6, 15, 40), outOfCredits);
  steps.set(at(11, 15, 40), unserved);
  steps.set(at(13, 20), firstTopUp);
  steps.set(at(14, 3), crashRedis);
  steps.set(at(15, 1), refilledUpTo(50, null));
  steps.set(at(16, 1), refilledUpTo(REFILL, 10));
  steps.set(at(20, 8, 10), unserved);
  steps.set(at(22, 10, 50), lateFailure);
  return [...steps].sort(([a], [b]) => a - b);
}

/** Every entry of the customer's ledger, all pages. */
async function ledger(
  run: Run,
): Promise<{ type: string; amount: number; at: string; period?: string; ref?: string }[]> {
  const items = [];
  let after: string | null = null;
  do {
    const url = `/admin/customers/${run.customer}/credits/ledger?limit=500${after ? `&after=${after}` : ''}`;
    const page = await ok(adminCall(run.gateways[1], 'GET', url));
    items.push(...page.items);
    after = page.next;
  } while (after);
  return items;
}

const sum = (amounts: number[]) => amounts.reduce((a, b) => a + b, 0);
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The metering export of the period, pulled before the crash and resumed from its cursor after:
 * each revision once (whichever replica closed it), and both each hour's latest revision and the
 * sum of the deltas (what a summing meter adds up) give the history's units; by route, the client's.
 */
async function reconcileExport(run: Run, seen: Tally, units: number): Promise<void> {
  const events = [...run.exported, ...(await pull(run, run.cursor)).events].filter(
    (e) => e.subject === run.customer && Date.parse(e.time) >= PERIOD_FROM && Date.parse(e.time) < PERIOD_TO,
  );
  expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
  const latest = new Map<string, UsageEvent>();
  for (const e of events) if ((latest.get(e.time)?.data.revision ?? 0) < e.data.revision) latest.set(e.time, e);
  expect(sum([...latest.values()].map((e) => e.data.units))).toBe(units);
  expect(sum(events.map((e) => e.data.delta))).toBe(units);
  const routes: Record<string, number> = {};
  for (const e of latest.values()) for (const [r, n] of Object.entries(e.data.routes)) routes[r] = (routes[r] ?? 0) + n;
  expect(routes).toEqual(seen.routes);
}

/** The closed period five ways (client, history, invoice, export, ledger), to the unit. */
async function reconcile(run: Run, seen: Tally): Promise<void> {
  const id = run.customer;
  const units = (await history(run, 'previous')).totals;
  const preview = await ok(adminCall(run.gateways[1], 'GET', `/admin/customers/${id}/invoice-preview?period=previous`));
  expect([preview.from, preview.to]).toEqual([iso(PERIOD_FROM), iso(PERIOD_TO)]);
  // The history counts what the client saw: served, refused (429), out of credits (402), failed upstream.
  expect(units).toMatchObject({
    admitted: seen.served,
    units: seen.servedUnits,
    limited: seen.limited,
    outOfCredits: seen.exhausted,
    banned: 0,
    upstreamFailed: seen.failed,
  });
  expect(preview.units).toBe(units.units);
  // The customer's hours are its keys' summed, whichever replica served them.
  const range = `from=${iso(PERIOD_FROM)}&to=${iso(PERIOD_TO)}`;
  const keys = await Promise.all(
    run.keyIds.map((key) => ok(adminCall(run.gateways[1], 'GET', `/admin/keys/${key}/usage/history?${range}`))),
  );
  expect(sum(keys.map((k) => k.totals.units))).toBe(units.units);
  expect(sum(keys.map((k) => k.totals.upstreamFailed))).toBe(units.upstreamFailed);
  await reconcileExport(run, seen, units.units);
  // Credits pay for served requests only (credits.md): those the pets service never served were
  // given back, in their hour's spend while it was open and as a refund entry for the hour that
  // closed before the late failure's answer. The ledger's net spend in the period is the billed units.
  const entries = await ledger(run);
  const inPeriod = (e: { at: string }) => Date.parse(e.at) >= PERIOD_FROM && Date.parse(e.at) < PERIOD_TO;
  const net = entries.filter((e) => (e.type === 'spend' || e.type === 'refund') && inPeriod(e));
  const spent = -sum(net.map((e) => e.amount));
  expect(seen.failedUnits).toBeGreaterThan(0);
  expect(spent).toBe(seen.servedUnits);
  expect(spent).toBe(units.units);
  expect(entries.filter((e) => e.type === 'refund' && inPeriod(e)).map((e) => e.amount)).toEqual([1]);
  expect(preview.creditsUsed).toBe(spent);
  // Every served unit was paid by a credit, so none is billed again as overage: the base fee alone
  // (billing.md), though the served units are past the included ones.
  expect(seen.servedUnits).toBeGreaterThan(PRICE.includedUnits);
  expect(preview.total).toBe(PRICE.base);
  // The balance is the ledger's sum less the open hour's spend; the top-up is in it once; at most
  // one refill per local day, each at a local midnight.
  const credits = await ok(adminCall(run.gateways[0], 'GET', `/admin/customers/${id}/credits`));
  expect(sum(entries.map((e) => e.amount)) - (credits.openHour?.spent ?? 0)).toBe(credits.balance);
  expect(entries.filter((e) => e.type === 'topup')).toEqual([
    expect.objectContaining({ amount: TOP_UP.amount, ref: run.firstTopUp?.json().ref }),
  ]);
  const refills = entries.filter((e) => e.type === 'refill').map((e) => Number(e.period?.replace(/^day:/, '')));
  expect(new Set(refills).size).toBe(refills.length);
  for (const start of refills) expect((start - PERIOD_FROM) % DAY).toBe(0);
}

describe('a billing period on two replicas', () => {
  let dir = '';
  let redis: RedisProcess | undefined;
  let pets: Awaited<ReturnType<typeof startPets>> | undefined;
  const open: { close(): unknown }[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'reconcile-'));
    redis = await RedisProcess.start(undefined, persistentRedis(dir));
    pets = await startPets();
  });
  afterAll(async () => {
    for (const it of open.reverse()) await it.close();
    await pets?.app.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function begin(): Promise<Run> {
    if (!redis || !pets) throw new Error('no Redis or pets (did beforeAll fail?)');
    const prefix = `rec${Math.random().toString(36).slice(2, 8)}:`;
    const aging = await connected(redisClient(redis.url, 2_000));
    open.push({ close: () => aging.disconnect() });
    const clock = testClockFrom(PERIOD_FROM + 5 * MINUTE, { client: aging, prefix });
    // Closed: while Redis is away the fallback would serve unmetered and spend no credits (credits.md).
    const env = { PLANS_FILE: plansFile(dir), RATE_LIMIT_FAILURE_MODE: 'closed' };
    const shared = { keyStore: new MemoryKeyStore(), customerStore: new MemoryCustomerStore() };
    const start = () =>
      startGateway({ redisUrl: redis?.url ?? null, upstream: pets?.url ?? '', prefix, env, now: clock.now, ...shared });
    const gateways: [TestGateway, TestGateway] = [await start(), await start()];
    open.push(...gateways);
    const customer = await adminCall(gateways[0], 'POST', '/admin/customers', {
      name: 'Acme',
      plan: 'metered',
      billing: { anchorDay: 10, timeZone: 'Europe/Berlin' },
      credits: { refill: { amount: REFILL, every: 'day' } },
    });
    expect(customer.statusCode, customer.body).toBe(201);
    const id = String(customer.json().id);
    const key = async (name: string): Promise<{ id: string; key: string }> => {
      const made = await adminCall(gateways[1], 'POST', '/admin/keys', { customerId: id, name });
      expect(made.statusCode, made.body).toBe(201);
      return made.json();
    };
    const [prod, ci] = [await key('prod'), await key('ci')];
    return {
      clock,
      gateways,
      keys: [prod.key, ci.key],
      keyIds: [prod.id, ci.id],
      customer: id,
      pets,
      redis,
      aging,
      exported: [],
      cursor: null,
      tally: new Tally(),
    };
  }

  it('agrees to the unit: history, invoice preview, metering export and ledger with what the client saw, through refills, a top-up retried and a Redis crash', async () => {
    const run = await begin();
    for (const [when, step] of schedule()) {
      await run.clock.moveTo(when);
      await step(run);
      await closePasses(run);
    }
    const period = run.tally;
    // Into the next period: its use must stay out of the closed one.
    run.tally = new Tally();
    await run.clock.moveTo(PERIOD_TO + 30 * MINUTE);
    await served(run);
    await closePasses(run);
    await reconcile(run, period);
    expect((await history(run, 'current')).totals.units).toBe(run.tally.servedUnits);
  }, 180_000);
});
