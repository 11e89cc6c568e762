import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { MemoryCustomerStore } from '../../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../../support/helpers.js';

/*
 * A customer's history as the limiter writes it: the requests of all its keys, on two replicas of
 * one Redis (or the embedded history), summed exactly into the customer's hours, days and period,
 * equal to the sum of its keys' own histories, and its place in the top lists.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);

function get(gw: TestGateway, url: string): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ method: 'GET', url, headers: admin });
}

async function post(gw: TestGateway, url: string, payload: object): Promise<Record<string, string>> {
  const res = await gw.admin.inject({ method: 'POST', url, headers: admin, payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function totals(gw: TestGateway, url: string): Promise<Record<string, number>> {
  const res = await get(gw, url);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().totals;
}

describe('a customer’s history written by the limiter', () => {
  it.each(['redis', 'memory'] as const)(
    'is the exact sum of its keys’ requests, by hour, day and period (%s)',
    async (backend) => {
      const keyStore = new MemoryKeyStore();
      const customerStore = new MemoryCustomerStore();
      const prefix = `cu${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
      const make = () =>
        gateways.start({
          prefix,
          keyStore,
          customerStore,
          ...(backend === 'memory' ? { redisUrl: null } : {}),
          env: { BAN_THRESHOLD: '1000', REDIS_COMMAND_TIMEOUT_MS: '2000' },
        });
      const a = await make();
      const b = backend === 'memory' ? a : await make();
      const customer = await post(a, '/admin/customers', {
        name: 'Acme',
        plan: 'pro',
        limits: { perMinute: 25 },
        billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
      });
      const keys = [
        await post(a, '/admin/keys', { customerId: customer.id, name: 'prod' }),
        await post(a, '/admin/keys', { customerId: customer.id, name: 'ci' }),
        await post(a, '/admin/keys', { customerId: customer.id, name: 'staging' }),
      ];
      const alone = await post(a, '/admin/keys', { plan: 'pro', name: 'alone' });
      // 3 keys × 12 concurrent over two replicas against a 25/min customer: 25 admitted, 11 limited.
      const sends = keys.flatMap((k, i) =>
        Array.from({ length: 12 }, (_, j) =>
          ((i + j) % 2 ? a : b).app.inject({ url: '/v1/pets', headers: bearer(k.key as string) }),
        ),
      );
      sends.push(a.app.inject({ url: '/v1/pets', headers: bearer(alone.key as string) }));
      const statuses = (await Promise.all(sends)).map((r) => r.statusCode);
      expect(statuses.filter((s) => s === 200).length).toBe(26);

      const perKey = await Promise.all(keys.map((k) => totals(a, `/admin/keys/${k.id}/usage/history`)));
      const sum = (name: string) => perKey.reduce((n, t) => n + (t[name] ?? 0), 0);
      for (const granularity of ['hour', 'day', 'period']) {
        const own = await totals(b, `/admin/customers/${customer.id}/usage/history?granularity=${granularity}`);
        expect(own, granularity).toMatchObject({ admitted: 25, limited: 11, units: 25 });
        for (const name of ['admitted', 'limited', 'banned', 'outOfCredits', 'forbidden', 'units', 'upstreamFailed']) {
          expect(own[name], `${granularity} ${name}`).toBe(sum(name));
        }
      }
      const top = (await get(a, '/admin/usage?window=24h')).json();
      expect(top.customers).toEqual([
        expect.objectContaining({ id: customer.id, name: 'Acme', plan: 'pro', admitted: 25, limited: 11 }),
      ]);
      expect(top.totals).toMatchObject({ admitted: 26, limited: 11, keys: 4 });
    },
  );
});
