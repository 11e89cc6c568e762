import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { MongoNetworkError } from 'mongodb';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RefundOnce } from '../../src/credits/credit-ledger.js';
import { CreditRefunds } from '../../src/credits/credit-refunds.js';
import type { CreditRule } from '../../src/credits/credit-terms.js';
import { MemoryCreditLedger } from '../../src/credits/memory-credit-ledger.js';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { generateApiKey, hashApiKey } from '../../src/keys/api-key.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { UTC_CALENDAR } from '../../src/limits/calendar.js';
import type { RefundRecord } from '../../src/usage/usage-spool.js';
import { ADMIN_TOKEN, bearer, startGateway, type TestGateway } from '../support/helpers.js';

/*
 * Credits of requests the pets service never served come back (docs/credits.md#unserved-requests-credits-given-back):
 * two replicas on one Redis, a pets stand-in that answers 503 (or, while `serving`, 200).
 */

const admin = bearer(ADMIN_TOKEN);
const POST_COST = 3;

let redis: TestRedis;
let pets: FastifyInstance;
let petsUrl = '';
let serving = false;
let dir = '';
const open: TestGateway[] = [];

beforeAll(async () => {
  redis = await startRedis();
  pets = Fastify();
  pets.all('/v1/*', async (_request, reply) =>
    serving ? [] : reply.code(503).send({ code: 'unavailable', status: 503, message: 'pets cannot serve' }),
  );
  await pets.listen({ host: '127.0.0.1', port: 0 });
  petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'refunds-'));
  writeFileSync(
    join(dir, 'plans.json'),
    JSON.stringify({ plans: { metered: { windows: { minute: 1000 } } }, routeCosts: { 'POST /v1/pets': POST_COST } }),
  );
});
afterEach(async () => {
  serving = false;
  for (const gw of open.splice(0)) await gw.close();
});
afterAll(async () => {
  await pets?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Replicas sharing one Redis (a prefix of their own) and one key and customer store. */
async function replicas(count: number): Promise<TestGateway[]> {
  const prefix = `rf${Math.random().toString(36).slice(2, 8)}:`;
  const shared = { keyStore: new MemoryKeyStore(), customerStore: new MemoryCustomerStore() };
  const env = { PLANS_FILE: join(dir, 'plans.json') };
  const gateways: TestGateway[] = [];
  for (let i = 0; i < count; i++) {
    gateways.push(await startGateway({ redisUrl: redis.url, upstream: petsUrl, prefix, env, ...shared }));
  }
  open.push(...gateways);
  return gateways;
}

const call = (gw: TestGateway, method: string, url: string, payload?: object) =>
  gw.admin.inject({ method: method as 'GET', url, headers: admin, ...(payload ? { payload } : {}) });

/** A customer with credit terms and `credits` topped up, and two keys of it. */
async function customerWith(gw: TestGateway, credits: number): Promise<{ id: string; keys: string[] }> {
  const made = await call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered', credits: {} });
  expect(made.statusCode, made.body).toBe(201);
  const id = String(made.json().id);
  const topUp = await call(gw, 'POST', `/admin/customers/${id}/credits`, { amount: credits, reason: 'test' });
  expect(topUp.statusCode, topUp.body).toBe(201);
  const keys: string[] = [];
  for (const name of ['prod', 'ci']) {
    const key = await call(gw, 'POST', '/admin/keys', { customerId: id, name });
    expect(key.statusCode, key.body).toBe(201);
    keys.push(String(key.json().key));
  }
  return { id, keys };
}

async function credits(gw: TestGateway, id: string) {
  const answer = await call(gw, 'GET', `/admin/customers/${id}/credits/ledger?limit=500`);
  expect(answer.statusCode, answer.body).toBe(200);
  const { balance, openHour, items } = answer.json() as {
    balance: number;
    openHour: { spent: number } | null;
    items: { type: string; amount: number }[];
  };
  // The balance is always the ledger's sum less the open hour's spend.
  expect(items.reduce((t, e) => t + e.amount, 0) - (openHour?.spent ?? 0)).toBe(balance);
  return { balance, spent: openHour?.spent ?? 0, items };
}

/** `count` requests at once, alternating replicas, keys and methods (GET costs 1, POST 3). */
function send(gateways: TestGateway[], keys: string[], count: number) {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      (gateways[i % gateways.length] as TestGateway).app.inject({
        method: i % 3 === 0 ? 'POST' : 'GET',
        url: '/v1/pets',
        headers: { ...bearer(keys[Math.floor(i / 2) % keys.length] as string), 'content-type': 'application/json' },
        ...(i % 3 === 0 ? { payload: { name: 'Rex', categoryId: 1 } } : {}),
      }),
    ),
  );
}

const flushRefunds = (gateways: TestGateway[]) => Promise.all(gateways.map((gw) => gw.deps.creditRefunds.flush()));

// The class alone first: a mutant it kills never waits for the gateways below.
describe('CreditRefunds', () => {
  const HOUR = 3_600_000;
  const rule = { refill: null, calendar: UTC_CALENDAR };

  /** The memory ledger, counting the refund writes it is sent. */
  class CountedLedger extends MemoryCreditLedger {
    writes: Array<[string, number, number]> = [];
    override async refund(owner: string, r: CreditRule, hour: number, units: number, now: number) {
      this.writes.push([owner, hour, units]);
      return super.refund(owner, r, hour, units, now);
    }
  }

  it('writes one refund per owner and hour for a batch of failures, and each failure once', async () => {
    const ledger = new CountedLedger();
    const now = Date.parse('2026-11-20T10:30:00Z');
    for (const owner of ['cus_a', 'cus_b']) ledger.spend(ledger.state(owner, rule, now).held, 50);
    const refunds = new CreditRefunds({
      ledger,
      ruleOf: async () => ({ rule }),
      now: () => now,
      onError: () => {},
      onDropped: () => {},
    });
    for (let i = 0; i < 40; i++) refunds.upstreamFailed(i % 2 === 0 ? 'cus_a' : 'cus_b', 1, now - i * 1000);
    await refunds.flush();
    await refunds.flush();
    const hour = now - (now % HOUR);
    expect(ledger.writes.sort()).toEqual([
      ['cus_a', hour, 20],
      ['cus_b', hour, 20],
    ]);
    expect((await ledger.balance('cus_a', rule, now)).openHour?.spent).toBe(30);
  });

  /** A memory ledger that fails its refunds with `failure` while it is set, as a Redis away does. */
  class AwayLedger extends MemoryCreditLedger {
    failure: Error | undefined;
    writes: Array<[string, number, number, RefundOnce | undefined]> = [];
    override async refund(owner: string, r: CreditRule, hour: number, units: number, now: number, once?: RefundOnce) {
      if (this.failure) throw this.failure;
      this.writes.push([owner, hour, units, once]);
      return super.refund(owner, r, hour, units, now, once);
    }
  }

  function spooling(ledger: AwayLedger, ruleOf = async (_owner: string) => ({ rule })) {
    const records: RefundRecord[] = [];
    const spooled: number[] = [];
    const errors: unknown[] = [];
    const now = Date.parse('2026-11-20T10:30:00Z');
    const refunds = new CreditRefunds({
      ledger,
      ruleOf,
      now: () => now,
      onError: (err) => errors.push(err),
      onDropped: () => {},
      spool: { append: (record) => records.push(record), spooled: (count) => spooled.push(count) },
    });
    return { refunds, records, spooled, errors, now, hour: now - (now % HOUR) };
  }

  it('spools the refunds a store away could not write, each under a reference of its own, and replays each once', async () => {
    const ledger = new AwayLedger();
    const run = spooling(ledger, async (owner) => {
      if (owner === 'cus_mongo') throw new MongoNetworkError('the key store is away');
      return { rule };
    });
    for (const owner of ['cus_a', 'cus_b']) ledger.spend(ledger.state(owner, rule, run.now).held, 10);
    ledger.failure = new Error('Connection is closed.');
    run.refunds.upstreamFailed('cus_a', 3, run.now);
    run.refunds.upstreamFailed('cus_b', 2, run.now - 60_000);
    run.refunds.upstreamFailed('cus_mongo', 1, run.now);
    await run.refunds.flush();
    expect(run.errors).toEqual([]);
    expect(run.spooled).toEqual([3]);
    expect([...run.records].sort((a, b) => a.owner.localeCompare(b.owner))).toEqual([
      { kind: 'refund', owner: 'cus_a', hour: run.hour, units: 3, ref: expect.any(String) },
      { kind: 'refund', owner: 'cus_b', hour: run.hour, units: 2, ref: expect.any(String) },
      { kind: 'refund', owner: 'cus_mongo', hour: run.hour, units: 1, ref: expect.any(String) },
    ]);
    expect(new Set(run.records.map((r) => r.ref)).size).toBe(3);

    // While the store is still away the replay rejects, so the spool keeps the records.
    const given = run.records.filter((r) => r.owner !== 'cus_mongo');
    await expect(run.refunds.replay(given)).rejects.toThrow('Connection is closed.');
    await expect(run.refunds.replay(run.records.filter((r) => r.owner === 'cus_mongo'))).rejects.toThrow(
      MongoNetworkError,
    );
    ledger.failure = undefined;
    await run.refunds.replay(given);
    await run.refunds.replay(given);
    // Each under its reference, kept a week: the second replay gives nothing more.
    const keepUntil = run.now + 7 * 86_400_000;
    expect(ledger.writes.map(([owner, , units, once]) => [owner, units, once?.keepUntil])).toEqual([
      ...given.map((r) => [r.owner, r.units, keepUntil]),
      ...given.map((r) => [r.owner, r.units, keepUntil]),
    ]);
    expect(ledger.writes.map(([, , , once]) => once?.ref)).toEqual([...given, ...given].map((r) => r.ref));
    expect((await ledger.balance('cus_a', rule, run.now)).openHour?.spent).toBe(7);
    expect((await ledger.balance('cus_b', rule, run.now)).openHour?.spent).toBe(8);
  });

  it('logs a failure that is not a store away, spools nothing, and replays the rest of a segment past it', async () => {
    const ledger = new AwayLedger();
    const run = spooling(ledger);
    ledger.spend(ledger.state('cus_a', rule, run.now).held, 10);
    ledger.failure = new Error('ERR something else');
    run.refunds.upstreamFailed('cus_a', 3, run.now);
    await run.refunds.flush();
    expect(run.errors).toEqual([ledger.failure]);
    expect(run.records).toEqual([]);
    expect(run.spooled).toEqual([]);

    // A replay: a record the ledger refuses is logged, and the next one still given back.
    let calls = 0;
    const flaky = spooling(ledger, async () => {
      calls++;
      if (calls === 1) throw new Error('ERR not a store away');
      return { rule };
    });
    ledger.failure = undefined;
    const records: RefundRecord[] = [
      { kind: 'refund', owner: 'cus_a', hour: run.hour, units: 1, ref: 'r1' },
      { kind: 'refund', owner: 'cus_a', hour: run.hour, units: 2, ref: 'r2' },
    ];
    await flaky.refunds.replay(records);
    expect(flaky.errors).toMatchObject([{ message: 'ERR not a store away' }]);
    expect((await ledger.balance('cus_a', rule, run.now)).openHour?.spent).toBe(8);
  });

  it('reports a write that fails and does not send it again', async () => {
    const errors: unknown[] = [];
    const ledger = new CountedLedger();
    const refunds = new CreditRefunds({
      ledger,
      ruleOf: async () => {
        throw new Error('store away');
      },
      now: () => 0,
      onError: (err) => errors.push(err),
      onDropped: () => {},
    });
    refunds.upstreamFailed('cus_a', 1, 0);
    await refunds.flush();
    await refunds.flush();
    expect(errors).toHaveLength(1);
    expect(ledger.writes).toEqual([]);
  });
});

describe('credits of requests the upstream never served', () => {
  it('come back on two replicas: N requests all answered 503 leave the balance where it started', async () => {
    const gateways = await replicas(2);
    const { id, keys } = await customerWith(gateways[0] as TestGateway, 100);
    const answers = await send(gateways, keys, 30);
    expect(answers.map((r) => r.statusCode)).toEqual(Array(30).fill(503));
    // Spent in the limiter's call, before pets answered: 10 writes of 3 and 20 reads of 1.
    expect((await credits(gateways[1] as TestGateway, id)).balance).toBe(50);
    await flushRefunds(gateways);
    const after = await credits(gateways[0] as TestGateway, id);
    expect(after).toMatchObject({ balance: 100, spent: 0 });
    // Written again (a second flush, the other replica's): nothing more comes back.
    await flushRefunds(gateways);
    expect((await credits(gateways[1] as TestGateway, id)).balance).toBe(100);
  });

  it('leaves the served requests paid for, and comes back within about a second without being asked', async () => {
    const gateways = await replicas(2);
    const { id, keys } = await customerWith(gateways[0] as TestGateway, 100);
    serving = true;
    expect((await send(gateways, keys, 3)).map((r) => r.statusCode)).toEqual([200, 200, 200]);
    serving = false;
    expect((await send(gateways, keys, 12)).map((r) => r.statusCode)).toEqual(Array(12).fill(503));
    // Served: a write of 3 and two reads. The replicas' own timers write the refunds.
    await vi.waitFor(async () => expect((await credits(gateways[1] as TestGateway, id)).balance).toBe(95), {
      timeout: 10_000,
      interval: 50,
    });
  });

  it('come back in the embedded mode too (no Redis: the memory ledger)', async () => {
    const gw = await startGateway({ upstream: petsUrl, env: { PLANS_FILE: join(dir, 'plans.json') } });
    open.push(gw);
    const { id, keys } = await customerWith(gw, 20);
    expect((await send([gw], keys, 6)).map((r) => r.statusCode)).toEqual(Array(6).fill(503));
    expect((await credits(gw, id)).balance).toBe(10);
    await flushRefunds([gw]);
    expect(await credits(gw, id)).toMatchObject({ balance: 20, spent: 0 });
  });

  it('come back to a lone key standing for itself, on two replicas', async () => {
    const gateways = await replicas(2);
    const gw = gateways[0] as TestGateway;
    const made = await call(gw, 'POST', '/admin/keys', { plan: 'metered', name: 'solo' });
    expect(made.statusCode, made.body).toBe(201);
    const { id, key } = made.json() as { id: string; key: string };
    expect((await call(gw, 'PATCH', `/admin/keys/${id}`, { credits: {} })).statusCode).toBe(200);
    const topUp = await call(gw, 'POST', `/admin/keys/${id}/credits`, { amount: 30, reason: 'test' });
    expect(topUp.statusCode, topUp.body).toBe(201);
    expect((await send(gateways, [key], 9)).map((r) => r.statusCode)).toEqual(Array(9).fill(503));
    const balance = async () =>
      (await call(gateways[1] as TestGateway, 'GET', `/admin/keys/${id}/credits`)).json().balance;
    // Three writes of 3 and six reads of 1.
    expect(await balance()).toBe(15);
    await flushRefunds(gateways);
    expect(await balance()).toBe(30);
  });

  it('come back to a lone key from API_KEYS_FILE after each failure, its history unbilled', async () => {
    const key = generateApiKey();
    const file = join(dir, `keys-${Math.random().toString(36).slice(2, 8)}.json`);
    writeFileSync(
      file,
      JSON.stringify([{ id: 'key_filesolo', name: 'solo', plan: 'metered', sha256: hashApiKey(key), credits: {} }]),
    );
    const prefix = `rf${Math.random().toString(36).slice(2, 8)}:`;
    const env = { PLANS_FILE: join(dir, 'plans.json'), API_KEYS_FILE: file };
    const gw = await startGateway({ redisUrl: redis.url, upstream: petsUrl, prefix, env });
    open.push(gw);
    const topUp = await call(gw, 'POST', '/admin/keys/key_filesolo/credits', { amount: 30, reason: 'test' });
    expect(topUp.statusCode, topUp.body).toBe(201);
    const balance = async () => (await call(gw, 'GET', '/admin/keys/key_filesolo/credits')).json().balance;
    // One failure at a time, a write (3) and a read (1) in turn: spent in the limiter's call, then back.
    for (let i = 0; i < 4; i++) {
      const answers = await send([gw], [key], 1 + (i % 2));
      expect(answers.map((r) => r.statusCode)).toEqual(Array(answers.length).fill(503));
      expect(await balance()).toBeLessThan(30);
      await flushRefunds([gw]);
      expect(await balance()).toBe(30);
    }
    const history = await call(gw, 'GET', '/admin/keys/key_filesolo/usage/history');
    expect(history.json().totals).toMatchObject({ admitted: 0, units: 0, upstreamFailed: 6 });
  });

  it('gives nothing back to a customer whose credits were turned off since, and says so in the log', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await startGateway({
      redisUrl: redis.url,
      upstream: petsUrl,
      env: { PLANS_FILE: join(dir, 'plans.json') },
      logs,
    });
    open.push(gw);
    const { id, keys } = await customerWith(gw, 100);
    expect((await send([gw], keys, 6)).map((r) => r.statusCode)).toEqual(Array(6).fill(503));
    const off = await call(gw, 'PATCH', `/admin/customers/${id}`, { credits: null });
    expect(off.statusCode, off.body).toBe(200);
    await flushRefunds([gw]);
    const on = await call(gw, 'PATCH', `/admin/customers/${id}`, { credits: {} });
    expect(on.statusCode, on.body).toBe(200);
    // Two writes of 3 and four reads of 1, still spent.
    expect((await credits(gw, id)).balance).toBe(90);
    expect(logs.filter((l) => l.customerId === id && l.level === 40)).toEqual([
      expect.objectContaining({
        units: 10,
        reason: 'its credits are turned off since',
        msg: expect.stringContaining(id),
      }),
    ]);
  });
});
