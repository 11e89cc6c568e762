import { createRegistry } from '@animal-store/common/metrics.js';
import type { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type App, createPet, newApp } from './helpers.js';

let app: App;
let registry: Registry;

beforeEach(async () => {
  registry = createRegistry('pets', false);
  app = newApp(undefined, registry);
  await app.ready();
});

afterEach(async () => {
  await app.close();
});

describe('probes', () => {
  it('GET /healthz answers 200 {status: ok}', async () => {
    const res = await app.inject({ url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 when the store answers', async () => {
    const res = await app.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });
});

describe('GET /metrics', () => {
  function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`)) continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(' ').at(-1));
    }
    return undefined;
  }

  it('times every store call by operation and outcome, and counts requests by route', async () => {
    const pet = await createPet(app, { name: 'Rex', categoryId: 1 });
    await createPet(app, { name: 'Fido', categoryId: 1 });
    await app.inject({ url: '/v1/pets' });
    await app.inject({ url: `/v1/pets/${pet.id}` });
    await app.inject({ url: '/readyz' });

    const res = { body: await registry.metrics() };
    const count = (operation: string) =>
      sample(res.body, 'pets_store_operation_duration_seconds_count', { operation, outcome: 'ok' });
    expect(count('create')).toBe(2);
    expect(count('list')).toBe(1);
    expect(count('get')).toBe(1);
    expect(count('ping')).toBe(1);
    expect(sample(res.body, 'http_requests_total', { route: '/v1/pets', method: 'POST', status: '201' })).toBe(2);
  });
});
