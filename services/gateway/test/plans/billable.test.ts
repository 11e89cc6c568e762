import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BILLABLE, isBilled, parseBillable } from '../../src/plans/billable.js';
import { parsePlansFile } from '../../src/plans/plans-file.js';
import { ADMIN_TOKEN, bearer, startGateway, type TestGateway } from '../support/helpers.js';

/*
 * Which answers a plan bills (plans/billable.ts): its `billable` statuses, checked when PLANS_FILE
 * is read; without one every status but 502, 503 and 504. One rule for the usage history's units
 * (so metering and the invoice) and the credits given back, through the gate, against a pets
 * stand-in that answers the status the test sets; and a pets service that cannot be reached is
 * never billed, whatever a plan lists.
 */

describe('a plan’s billable statuses in PLANS_FILE', () => {
  const problems = (billable: unknown) => {
    const found: string[] = [];
    expect(parseBillable(billable, 'plans.pro.billable', found)).toBeUndefined();
    return found;
  };

  it.each([
    [
      [],
      [
        'plans.pro.billable must be a non-empty list of the statuses billed: a status (500), a range ("200-499") or a class ("4xx"), each within 100-599',
      ],
    ],
    [
      '2xx',
      [
        'plans.pro.billable must be a non-empty list of the statuses billed: a status (500), a range ("200-499") or a class ("4xx"), each within 100-599',
      ],
    ],
    [[600], ['plans.pro.billable[0]: 600 is not a status']],
    [[200.5], ['plans.pro.billable[0]: 200.5 is not a status']],
    [['499-200'], ['plans.pro.billable[0]: "499-200" runs backwards: write the lower status first']],
    [['200-700'], ['plans.pro.billable[0]: "200-700" is not within 100-599']],
    [
      ['6xx'],
      [
        'plans.pro.billable[0]: "6xx" is not a status (500), a range ("200-499") or a class ("4xx"), each within 100-599',
      ],
    ],
    [
      [200, null, '2xx', 'all'],
      [
        'plans.pro.billable[1]: null is not a status (500), a range ("200-499") or a class ("4xx"), each within 100-599',
        'plans.pro.billable[3]: "all" is not a status (500), a range ("200-499") or a class ("4xx"), each within 100-599',
      ],
    ],
  ])('refuses %j naming each entry that is wrong', (billable, expected) => {
    expect(problems(billable)).toEqual(expected);
  });

  it('reads statuses, ranges and classes, and stops the start naming the plan’s field', () => {
    const found: string[] = [];
    expect(parseBillable([500, '200-299', '4xx'], 'at', found)).toEqual([
      [500, 500],
      [200, 299],
      [400, 499],
    ]);
    expect(found).toEqual([]);
    const file = JSON.stringify({ plans: { pro: { windows: { minute: 10 }, billable: ['2xx', 'x'] } } });
    expect(parsePlansFile(file, 'PLANS_FILE=plans.json', false)).toEqual([
      'PLANS_FILE=plans.json: plans.pro.billable[1]: "x" is not a status (500), a range ("200-499") or a class ("4xx"), each within 100-599',
    ]);
  });

  it('bills by default every status but 502, 503 and 504, and never an answer the gateway made for pets', () => {
    const billed = (status: number) => isBilled(undefined, status, 'upstream');
    expect([200, 201, 304, 400, 404, 429, 500, 501, 505].map(billed)).toEqual(Array(9).fill(true));
    expect([502, 503, 504].map(billed)).toEqual([false, false, false]);
    expect(DEFAULT_BILLABLE.some(([from, to]) => from <= 503 && 503 <= to)).toBe(false);
    expect(isBilled([[100, 599]], 503, 'gateway')).toBe(false);
    expect(isBilled([[100, 599]], 503, 'upstream')).toBe(true);
  });
});

const admin = bearer(ADMIN_TOKEN);
let pets: FastifyInstance;
let petsUrl = '';
/** What the pets stand-in answers. */
let status = 200;
let dir = '';
const open: TestGateway[] = [];

beforeAll(async () => {
  pets = Fastify();
  pets.all('/v1/*', async (_request, reply) =>
    status < 400
      ? reply.code(status).send([])
      : reply.code(status).send({ code: 'x', status, message: 'pets says no' }),
  );
  await pets.listen({ host: '127.0.0.1', port: 0 });
  petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'billable-'));
  const plans = {
    // The default: a 500 is billed.
    usual: { windows: { minute: 1000 } },
    // Billing what pets served or refused for the client's own fault, not its failures.
    strict: { windows: { minute: 1000 }, billable: ['2xx', '3xx', '4xx'] },
    // Every status, even 503: still not an answer the gateway gave for an unreachable pets.
    everything: { windows: { minute: 1000 }, billable: ['100-599'] },
  };
  writeFileSync(join(dir, 'plans.json'), JSON.stringify({ plans }));
});
afterEach(async () => {
  status = 200;
  for (const gw of open.splice(0)) await gw.close();
});
afterAll(async () => {
  await pets?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function gateway(upstream = petsUrl): Promise<TestGateway> {
  const gw = await startGateway({ redisUrl: null, upstream, env: { PLANS_FILE: join(dir, 'plans.json') } });
  open.push(gw);
  return gw;
}

const call = (gw: TestGateway, method: string, url: string, payload?: object) =>
  gw.admin.inject({ method: method as 'GET', url, headers: admin, ...(payload ? { payload } : {}) });

/** A lone key on `plan` with 100 credits. */
async function keyOn(gw: TestGateway, plan: string): Promise<{ id: string; key: string }> {
  const made = await call(gw, 'POST', '/admin/keys', { plan });
  expect(made.statusCode, made.body).toBe(201);
  const id = String(made.json().id);
  expect((await call(gw, 'PATCH', `/admin/keys/${id}`, { credits: {} })).statusCode).toBe(200);
  expect((await call(gw, 'POST', `/admin/keys/${id}/credits`, { amount: 100, reason: 'test' })).statusCode).toBe(201);
  return { id, key: String(made.json().key) };
}

/** Sends `count` requests with `key`, then what the history billed and the balance once refunds are written. */
async function billedAfter(gw: TestGateway, who: { id: string; key: string }, count: number) {
  const statuses = [];
  for (let i = 0; i < count; i++) {
    statuses.push((await gw.app.inject({ url: '/v1/pets', headers: bearer(who.key) })).statusCode);
  }
  await gw.deps.creditRefunds.flush();
  const history = await call(gw, 'GET', `/admin/keys/${who.id}/usage/history?period=current`);
  expect(history.statusCode, history.body).toBe(200);
  const credits = await call(gw, 'GET', `/admin/keys/${who.id}/credits`);
  const { units, upstreamFailed } = history.json().totals;
  return { statuses, units, upstreamFailed, balance: credits.json().balance };
}

describe('billable statuses through the gate', () => {
  it('bills a 500 on the default plan, and gives its credits back on a plan that bills none of 5xx', async () => {
    const gw = await gateway();
    const usual = await keyOn(gw, 'usual');
    const strict = await keyOn(gw, 'strict');
    status = 500;
    expect(await billedAfter(gw, usual, 4)).toEqual({
      statuses: [500, 500, 500, 500],
      units: 4,
      upstreamFailed: 0,
      balance: 96,
    });
    expect(await billedAfter(gw, strict, 4)).toEqual({
      statuses: [500, 500, 500, 500],
      units: 0,
      upstreamFailed: 4,
      balance: 100,
    });
    // A 404 is the client's: billed on both.
    status = 404;
    expect((await billedAfter(gw, strict, 2)).units).toBe(2);
  });

  it('gives a 503 back by default, bills it on a plan listing it, and never bills an unreachable pets service', async () => {
    const gw = await gateway();
    const usual = await keyOn(gw, 'usual');
    const everything = await keyOn(gw, 'everything');
    status = 503;
    expect(await billedAfter(gw, usual, 3)).toMatchObject({ units: 0, upstreamFailed: 3, balance: 100 });
    expect(await billedAfter(gw, everything, 3)).toMatchObject({ units: 3, upstreamFailed: 0, balance: 97 });
    const unreachable = await gateway('http://127.0.0.1:9');
    const stranded = await keyOn(unreachable, 'everything');
    expect(await billedAfter(unreachable, stranded, 3)).toEqual({
      statuses: [503, 503, 503],
      units: 0,
      upstreamFailed: 3,
      balance: 100,
    });
  });
});

describe('GET /admin/plans', () => {
  it('shows a plan’s billable statuses as ranges, and none for a plan on the default', async () => {
    const gw = await gateway();
    const plans = (await call(gw, 'GET', '/admin/plans')).json().plans as { name: string; billable?: unknown }[];
    expect(Object.fromEntries(plans.map((p) => [p.name, p.billable]))).toEqual({
      usual: undefined,
      strict: ['200-299', '300-399', '400-499'],
      everything: ['100-599'],
    });
  });
});
