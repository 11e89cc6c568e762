import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudEvent, HTTP } from 'cloudevents';
import type { LightMyRequestResponse } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { meteringEvents } from '../../src/admin/routes/metering-events.js';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { HOUR_MS, hourStart } from '../../src/usage/usage-history.js';
import { expectError } from '../support/admin.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';

/*
 * GET /admin/metering/events after real traffic through the gate, on two replicas on one Redis
 * (and embedded): each closed hour once, as CloudEvents the cloudevents SDK reads, its units by
 * route summing to the usage history's; a late answer makes the next revision; a restart loses
 * nothing; the Stripe view and the usage.reported webhook carry the same events.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);

/**
 * A pets service that answers at once, except a request sent with `x-hold`, which waits until
 * release() and is then answered 503: an admitted request whose failure is known only later.
 */
async function holdingUpstream() {
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    req.resume();
    if (req.headers['x-hold']) {
      held.push(res);
      return;
    }
    res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' }).end('[]');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held: () => held.length,
    release() {
      for (const res of held.splice(0)) {
        res
          .writeHead(503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ code: 'overloaded', message: 'busy', status: 503 }));
      }
    },
    async close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

let upstream: Awaited<ReturnType<typeof holdingUpstream>>;
beforeAll(async () => {
  upstream = await holdingUpstream();
});
afterAll(async () => {
  await upstream.close();
});

function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'metering-')), 'plans.json');
  writeFileSync(
    path,
    JSON.stringify({ plans: { metered: { windows: { minute: 1000 } } }, routeCosts: { 'POST /v1/pets': 5 } }),
  );
  return path;
}

const ENV = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };

/**
 * What a close delay's wait gives in production: every replica's history has written its batches
 * (they go every second of real time, which a test clock does not move).
 */
async function settle(...gws: TestGateway[]): Promise<void> {
  await Promise.all(gws.map((gw) => gw.deps.history.flush()));
}

/** Closing passes on each distinct replica at once: the records appended, all told. */
async function closeAll(...gws: TestGateway[]) {
  await settle(...gws);
  return (await Promise.all([...new Set(gws)].map((gw) => gw.deps.meteringCloser.closeDue()))).flat();
}

/** A clock the test moves: replicas and the closer read it. */
function testClock() {
  let at = Date.now();
  return {
    now: () => at,
    advance(ms: number) {
      at += ms;
    },
  };
}

/** Two replicas on one Redis, or the one embedded gateway twice. */
async function replicas(redis: boolean, now: () => number, prefix = newPrefix()): Promise<[TestGateway, TestGateway]> {
  const env = { ...ENV, PLANS_FILE: plansFile() };
  const shared = { keyStore: new MemoryKeyStore(), customerStore: new MemoryCustomerStore() };
  if (!redis) {
    const gw = await gateways.start({ redisUrl: null, upstream: upstream.url, env, now });
    return [gw, gw];
  }
  const one = () => gateways.start({ prefix, env, now, upstream: upstream.url, ...shared });
  return [await one(), await one()];
}

const newPrefix = () => `met${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;

const call = (gw: TestGateway, method: string, url: string, payload?: object) =>
  gw.admin.inject({ method: method as 'GET', url, headers: admin, ...(payload ? { payload } : {}) });

async function created(res: Promise<LightMyRequestResponse>) {
  const answer = await res;
  expect(answer.statusCode, answer.body).toBe(201);
  return answer.json();
}

function send(gw: TestGateway, key: string, method: 'GET' | 'POST', hold = false) {
  return gw.app.inject({
    method,
    url: '/v1/pets',
    headers: { ...bearer(key), 'content-type': 'application/json', ...(hold ? { 'x-hold': '1' } : {}) },
    ...(method === 'POST' ? { payload: { name: 'Rex', categoryId: 1 } } : {}),
  });
}

async function events(gw: TestGateway, query = '') {
  const res = await call(gw, 'GET', `/admin/metering/events${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { events: Array<Record<string, never>>; next: string | null };
}

/** Every event through the SDK, both as an object and as a structured-mode HTTP message. */
function parsed(list: object[]): CloudEvent<Record<string, unknown>>[] {
  return list.map((e) => {
    const fromObject = new CloudEvent<Record<string, unknown>>(e as never);
    const message = { headers: { 'content-type': 'application/cloudevents+json' }, body: JSON.stringify(e) };
    const [fromHttp] = [HTTP.toEvent<Record<string, unknown>>(message)].flat();
    expect(fromHttp?.id).toBe(fromObject.id);
    expect(fromObject.validate()).toBe(true);
    return fromObject;
  });
}

/**
 * A lone key's hour on two replicas (or the embedded one), closed with a POST still unanswered:
 * a GET (1 unit) and the held POST (5) admitted, the clock at the hour's close, the histories
 * written. `late` answers 503 once upstream.release() is called: a change to the closed hour.
 */
async function closedWithAnswerPending(redis: boolean) {
  const clock = testClock();
  const [a, b] = await replicas(redis, clock.now);
  const key = await created(call(a, 'POST', '/admin/keys', { plan: 'metered' }));
  const hour = hourStart(clock.now());
  await send(a, key.key, 'GET');
  const late = send(b, key.key, 'POST', true);
  while (upstream.held() === 0) await new Promise((r) => setImmediate(r));
  clock.advance(hour + HOUR_MS + 300_000 - clock.now());
  await settle(a, b);
  return { clock, a, b, key, hour, late };
}

describe.each([
  ['two replicas on Redis', true],
  ['the embedded mode', false],
])('the metering export (%s)', (_label, redis) => {
  it('reports each closed hour once, by route, summing to the usage history, for customers and lone keys', async () => {
    const clock = testClock();
    const [a, b] = await replicas(redis, clock.now);
    const customer = await created(call(a, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered' }));
    const key = await created(call(a, 'POST', '/admin/keys', { customerId: customer.id }));
    const lone = await created(call(a, 'POST', '/admin/keys', { plan: 'metered' }));
    const hour = hourStart(clock.now());
    await Promise.all([
      send(a, key.key, 'GET'),
      send(b, key.key, 'GET'),
      send(b, key.key, 'GET'),
      send(a, key.key, 'POST'),
      send(b, key.key, 'POST'),
      send(b, lone.key, 'GET'),
    ]);
    // Not closed until METERING_CLOSE_DELAY_MS (5 min) after the hour's end.
    clock.advance(hour + HOUR_MS + 299_000 - clock.now());
    expect(await closeAll(a, b)).toEqual([]);
    clock.advance(1_000);
    expect(await closeAll(a, b)).toHaveLength(2);

    const page = await events(b);
    const [ours, loneEvent] = parsed(page.events).sort((x) => (x.subject === customer.id ? -1 : 1));
    expect(ours).toMatchObject({
      subject: customer.id,
      time: new Date(hour).toISOString(),
      type: 'com.animalstore.usage.reported',
      source: 'animal-store-gateway',
      datacontenttype: 'application/json',
    });
    expect(ours?.data).toEqual({
      units: 13,
      delta: 13,
      routes: { 'GET /v1/pets': 3, 'POST /v1/pets': 10 },
      hourStart: new Date(hour).toISOString(),
      hourEnd: new Date(hour + HOUR_MS).toISOString(),
      revision: 1,
    });
    expect(loneEvent).toMatchObject({ subject: lone.id, data: { units: 1, routes: { 'GET /v1/pets': 1 } } });
    const history = await call(a, 'GET', `/admin/customers/${customer.id}/usage/history?granularity=hour`);
    expect(history.json().totals.units).toBe(13);
    // Another pass on either replica appends nothing more.
    expect(await closeAll(a, b)).toEqual([]);
    expect((await events(a, `?after=${page.next}`)).events).toEqual([]);
  });

  // India is UTC+5:30: the customer's hours run from :30 past the UTC hour, as its history's do.
  it('reports an Asia/Kolkata customer by its local hours, each with its history’s units', async () => {
    const clock = testClock();
    const [a, b] = await replicas(redis, clock.now);
    const customer = await created(
      call(a, 'POST', '/admin/customers', {
        name: 'Mumbai',
        plan: 'metered',
        billing: { anchorDay: 1, timeZone: 'Asia/Kolkata' },
      }),
    );
    const key = await created(call(a, 'POST', '/admin/keys', { customerId: customer.id }));
    const first = hourStart(clock.now() - HOUR_MS / 2) + HOUR_MS / 2;
    await Promise.all([send(a, key.key, 'GET'), send(b, key.key, 'POST')]);
    clock.advance(first + HOUR_MS + 60_000 - clock.now());
    await Promise.all([send(a, key.key, 'POST'), send(b, key.key, 'POST'), send(b, key.key, 'GET')]);
    clock.advance(first + 2 * HOUR_MS + 300_000 - clock.now());
    expect(await closeAll(a, b)).toHaveLength(2);

    const list = parsed((await events(b)).events).filter((e) => e.subject === customer.id);
    const iso = (at: number) => new Date(at).toISOString();
    expect(list.map((e) => [e.time, e.data?.hourStart, e.data?.hourEnd, e.data?.units, e.data?.routes])).toEqual([
      [iso(first), iso(first), iso(first + HOUR_MS), 6, { 'GET /v1/pets': 1, 'POST /v1/pets': 5 }],
      [
        iso(first + HOUR_MS),
        iso(first + HOUR_MS),
        iso(first + 2 * HOUR_MS),
        11,
        { 'GET /v1/pets': 1, 'POST /v1/pets': 10 },
      ],
    ]);
    const history = await call(
      a,
      'GET',
      `/admin/customers/${customer.id}/usage/history?granularity=hour&from=${iso(first)}&to=${iso(first + 2 * HOUR_MS - 1)}`,
    );
    expect(history.statusCode, history.body).toBe(200);
    const series = (history.json() as { series: Array<{ start: string; units: number }> }).series;
    expect(series.map((h) => [h.start, h.units])).toEqual(list.map((e) => [e.time, e.data?.units]));
  });

  it('makes a late failure the next revision of the same hour, with the new totals', async () => {
    const clock = testClock();
    const [a, b] = await replicas(redis, clock.now);
    const customer = await created(call(a, 'POST', '/admin/customers', { name: 'Late', plan: 'metered' }));
    const key = await created(call(a, 'POST', '/admin/keys', { customerId: customer.id }));
    const hour = hourStart(clock.now());
    await Promise.all([send(a, key.key, 'GET'), send(b, key.key, 'POST')]);
    const late = send(b, key.key, 'POST', true);
    while (upstream.held() === 0) await new Promise((r) => setImmediate(r));
    clock.advance(hour + HOUR_MS + 300_000 - clock.now());
    expect(await closeAll(a, b)).toHaveLength(1);
    upstream.release();
    expect((await late).statusCode).toBe(503);
    expect(await closeAll(a, b)).toHaveLength(1);

    const list = parsed((await events(a)).events).filter((e) => e.subject === customer.id);
    expect(list.map((e) => [e.time, e.data?.revision, e.data?.units, e.data?.delta, e.data?.routes])).toEqual([
      // Closed with the POST still unanswered: its units are admitted, on no route yet.
      [new Date(hour).toISOString(), 1, 11, 11, { 'GET /v1/pets': 1, 'POST /v1/pets': 5, unattributed: 5 }],
      [new Date(hour).toISOString(), 2, 6, -5, { 'GET /v1/pets': 1, 'POST /v1/pets': 5 }],
    ]);
    expect(new Set(list.map((e) => e.id)).size).toBe(2);
  });

  // Stripe sums a customer's meter events: a correction sent as its new total would bill the hour twice.
  it('sends a corrected hour to Stripe as its change, not its new total: the events sum to the hour’s units', async () => {
    const clock = testClock();
    const [a, b] = await replicas(redis, clock.now);
    const customer = await created(
      call(a, 'POST', '/admin/customers', { name: 'Striped', plan: 'metered', externalId: 'cus_StripeLate01' }),
    );
    const key = await created(call(a, 'POST', '/admin/keys', { customerId: customer.id }));
    const hour = hourStart(clock.now());
    await Promise.all([send(a, key.key, 'GET'), send(b, key.key, 'POST')]);
    const late = send(b, key.key, 'POST', true);
    while (upstream.held() === 0) await new Promise((r) => setImmediate(r));
    clock.advance(hour + HOUR_MS + 300_000 - clock.now());
    expect(await closeAll(a, b)).toHaveLength(1);
    upstream.release();
    expect((await late).statusCode).toBe(503);
    expect(await closeAll(a, b)).toMatchObject([{ revision: 2, units: 6, delta: -5 }]);

    const ids = parsed((await events(a)).events)
      .filter((e) => e.subject === customer.id)
      .map((e) => e.id);
    const stripe = (await events(b, '?format=stripe-meter-events')).events as unknown as Array<{
      identifier: string;
      payload: { stripe_customer_id: string; value: string };
      timestamp: number;
    }>;
    expect(stripe.map((e) => [e.identifier, e.payload, e.timestamp])).toEqual([
      [ids[0], { stripe_customer_id: 'cus_StripeLate01', value: '11' }, hour / 1000],
      [ids[1], { stripe_customer_id: 'cus_StripeLate01', value: '-5' }, hour / 1000],
    ]);
    // What Stripe bills for the hour: the sum of its events, the hour's units in the last revision.
    expect(stripe.reduce((sum, e) => sum + Number(e.payload.value), 0)).toBe(6);
  });

  it('passes on the timer’s turn once a quarter hour has closed: a late correction waits for the next quarter', async () => {
    const { clock, a, b, key, hour, late } = await closedWithAnswerPending(redis);
    const turns = async () =>
      (await Promise.all([...new Set([a, b])].map((gw) => gw.deps.meteringCloser.tick()))).flat();
    expect(await turns()).toHaveLength(1);
    upstream.release();
    expect((await late).statusCode).toBe(503);
    await settle(a, b);
    // A minute on, the same quarter: no pass, so the correction is not read yet.
    clock.advance(60_000);
    expect(await turns()).toEqual([]);
    // The next quarter hour past its close delay: a pass, and the correction is the next revision.
    clock.advance(15 * 60_000);
    const [correction, ...more] = await turns();
    expect(more).toEqual([]);
    expect(correction).toMatchObject({ subject: key.id, hour, revision: 2, units: 1 });
    expect(await turns()).toEqual([]);
  });
});

describe('the metering export on Redis', () => {
  it('loses nothing across a restart: a billing job resumes from its cursor, and nothing is appended twice', async () => {
    const clock = testClock();
    const prefix = newPrefix();
    const [a, b] = await replicas(true, clock.now, prefix);
    const keys = await Promise.all(
      [1, 2, 3].map(async () => created(call(a, 'POST', '/admin/keys', { plan: 'metered' }))),
    );
    const hour = hourStart(clock.now());
    await Promise.all(keys.map((k) => send(a, k.key, 'GET')));
    clock.advance(hour + HOUR_MS + 300_000 - clock.now());
    await closeAll(a);
    const first = await events(b, '?limit=1');
    expect(first.events).toHaveLength(1);
    await Promise.all([a.close(), b.close()]);

    const [c] = await replicas(true, clock.now, prefix);
    expect(await c.deps.meteringCloser.closeDue()).toEqual([]);
    const rest = await events(c, `?after=${first.next}&limit=1000`);
    const all = parsed([...first.events, ...rest.events]);
    expect(all.map((e) => e.subject).sort()).toEqual(keys.map((k) => k.id).sort());
    const again = await events(c);
    expect(again.events.map((e) => e.id)).toEqual(all.map((e) => e.id));
    // The route's answer, asked in the same process (as the reconciliation test does).
    expect(await meteringEvents(c.deps.metering, { limit: 1000 }, 'api_units')).toEqual(again);
  });

  it('runs a quarter hour’s pass on one replica: another replica’s turn in that quarter reads nothing', async () => {
    const { clock, a, b, key, late } = await closedWithAnswerPending(true);
    expect(await a.deps.meteringCloser.tick()).toMatchObject([{ subject: key.id, revision: 1, units: 6 }]);
    upstream.release();
    expect((await late).statusCode).toBe(503);
    await settle(a, b);
    // b's first turn, in the quarter a has passed: no pass of its own, so the change waits.
    expect(await b.deps.meteringCloser.tick()).toEqual([]);
    clock.advance(15 * 60_000);
    const turns = await Promise.all([a, b].map((gw) => gw.deps.meteringCloser.tick()));
    expect(turns.flat()).toMatchObject([{ subject: key.id, revision: 2, units: 1 }]);
    expect(turns.filter((t) => t.length > 0)).toHaveLength(1);
  });

  it('pages with limit and refuses a bad cursor or limit in the Error shape', async () => {
    const clock = testClock();
    const [a] = await replicas(true, clock.now);
    const keys = await Promise.all(
      [1, 2, 3].map(async () => created(call(a, 'POST', '/admin/keys', { plan: 'metered' }))),
    );
    await Promise.all(keys.map((k) => send(a, k.key, 'GET')));
    clock.advance(2 * HOUR_MS);
    await closeAll(a);
    const ids: string[] = [];
    let after = '';
    for (let i = 0; i < 3; i++) {
      const page = await events(a, `?limit=1${after}`);
      expect(page.events).toHaveLength(1);
      ids.push(String(page.events[0]?.id));
      after = `&after=${page.next}`;
    }
    expect(new Set(ids).size).toBe(3);
    for (const query of [
      '?limit=0',
      '?limit=1001',
      '?limit=many',
      '?after=not-a-cursor',
      `?after=${'x'.repeat(300)}`,
    ]) {
      expectError(await call(a, 'GET', `/admin/metering/events${query}`), 400, 'invalid_request');
    }
  });

  // usage.reported once: of two replicas closing the same hours at once, the store lets one append
  // each revision, and only the replica that appended it enqueues its webhook.
  it('two replicas closing the same hours send exactly one usage.reported delivery per revision', async () => {
    const clock = testClock();
    const [a, b] = await replicas(true, clock.now);
    const hook = await startReceiver();
    try {
      await created(call(a, 'POST', '/admin/webhooks', { url: hook.url, events: ['usage.reported'] }));
      const customer = await created(call(a, 'POST', '/admin/customers', { name: 'Twice', plan: 'metered' }));
      const key = await created(call(a, 'POST', '/admin/keys', { customerId: customer.id }));
      const lone = await Promise.all([1, 2, 3].map(() => created(call(b, 'POST', '/admin/keys', { plan: 'metered' }))));
      const hour = hourStart(clock.now());
      await Promise.all([send(a, key.key, 'GET'), send(b, key.key, 'POST'), ...lone.map((k) => send(a, k.key, 'GET'))]);
      const late = send(b, key.key, 'POST', true);
      while (upstream.held() === 0) await new Promise((r) => setImmediate(r));
      clock.advance(hour + HOUR_MS + 300_000 - clock.now());
      // Both replicas pass at once: two passes race for each hour's first revision.
      const first = await closeAll(a, b);
      upstream.release();
      expect((await late).statusCode).toBe(503);
      const second = await closeAll(a, b);
      expect([first.length, second.length]).toEqual([4, 1]);

      const ids = (await events(a, '?limit=1000')).events.map((e) => String(e.id));
      expect(ids).toHaveLength(5);
      await hook.until(ids.length);
      const drained = async () => {
        for (const gw of [a, b]) expect((await gw.deps.webhooks.queue.stats()).depth).toBe(0);
      };
      await vi.waitFor(drained, { timeout: 10_000, interval: 20 });
      // Another pass on both finds nothing to append, so nothing more to send.
      expect(await closeAll(a, b)).toEqual([]);
      await vi.waitFor(drained, { timeout: 10_000, interval: 20 });
      const sent = hook.received.map((r) => String(r.headers['webhook-id']));
      expect(sent.sort()).toEqual(ids.map((id) => `msg_${id}`).sort());
    } finally {
      await hook.close();
    }
  });

  it('gives the Stripe view for customers with an externalId, and signs usage.reported once per revision', async () => {
    const clock = testClock();
    const [a, b] = await replicas(true, clock.now);
    const hook = await startReceiver();
    try {
      const endpoint = await created(call(a, 'POST', '/admin/webhooks', { url: hook.url, events: ['usage.reported'] }));
      const customer = await created(
        call(a, 'POST', '/admin/customers', { name: 'Striped', plan: 'metered', externalId: 'cus_StripeAcme01' }),
      );
      const key = await created(call(a, 'POST', '/admin/keys', { customerId: customer.id }));
      await Promise.all([send(a, key.key, 'POST'), send(b, key.key, 'GET')]);
      clock.advance(2 * HOUR_MS);
      expect(await closeAll(a, b)).toHaveLength(1);

      const cloud = parsed((await events(a)).events).find((e) => e.subject === customer.id);
      expect(cloud?.data?.externalId).toBe('cus_StripeAcme01');
      const stripe = (await events(a, '?format=stripe-meter-events')).events;
      expect(stripe).toEqual([
        {
          event_name: 'api_units',
          identifier: cloud?.id,
          payload: { stripe_customer_id: 'cus_StripeAcme01', value: '6' },
          timestamp: Math.floor(Date.parse(String(cloud?.time)) / 1000),
        },
      ]);

      await hook.until(1);
      const [delivery] = hook.received;
      const headers = delivery?.headers ?? {};
      // Signed as Standard Webhooks says, at the test clock's time (verify() would hold it to the real one).
      const signature = new Webhook(endpoint.secret).sign(
        String(headers['webhook-id']),
        new Date(Number(headers['webhook-timestamp']) * 1000),
        delivery?.body ?? '',
      );
      expect(String(headers['webhook-signature']).split(' ')).toContain(signature);
      const verified = JSON.parse(delivery?.body ?? '{}') as { type: string; data: object };
      expect(verified.type).toBe('usage.reported');
      expect(parsed([verified.data])[0]?.id).toBe(cloud?.id);
      expect(delivery?.headers['webhook-id']).toBe(`msg_${cloud?.id}`);
    } finally {
      await hook.close();
    }
  });
});

describe('the metering export’s reference', () => {
  it('documents its page, in either format, and its errors in GET /admin/openapi.json', async () => {
    const [a] = await replicas(false, Date.now);
    const res = await call(a, 'GET', '/admin/openapi.json');
    expect(res.statusCode, res.body).toBe(200);
    const { responses } = res.json().paths['/admin/metering/events'].get;
    const page = responses['200'].content['application/json'].schema;
    expect(page.required).toEqual(['events', 'next']);
    const formats = page.properties.events.anyOf as Array<{ items: { required: string[] } }>;
    expect(formats.map((f) => f.items.required[0])).toEqual(['specversion', 'event_name']);
    expect(responses['400'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
  });
});
