import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/runtime.js';
import { killAllServices, metricValue, ServiceProcess } from '../support/service-process.js';

/**
 * Which listener serves what, on the services as processes (server.ts as production runs it):
 * /metrics only on METRICS_PORT, the API never there, and GET /metrics on the public port a
 * 404 in the Error shape, with or without a key.
 */

let pets: ServiceProcess;
let gateway: ServiceProcess;
let adminPort: number;

beforeAll(async () => {
  pets = await ServiceProcess.start('pets', { LOG_LEVEL: 'warn' }, { ready: '/readyz' });
  adminPort = await freePort();
  gateway = await ServiceProcess.start(
    'gateway',
    {
      LOG_LEVEL: 'warn',
      PETS_URL: pets.url,
      ADMIN_TOKEN: 'listeners-admin-token-0123456789',
      ADMIN_PORT: String(adminPort),
      PORTAL_PORT: '0',
    },
    { ready: '/readyz' },
  );
  // Some traffic, so the request series exist.
  expect((await fetch(`${gateway.url}/v1/pets`)).status).toBe(401);
  expect((await fetch(`${pets.url}/v1/pets`)).status).toBe(200);
});

afterAll(async () => {
  await killAllServices();
});

async function expectError(res: Response, status: number, code: string): Promise<void> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(await res.json()).toEqual({ code, message: expect.any(String), status });
}

describe('GET /metrics outside the metrics listener', () => {
  const cases = [
    { name: 'the gateway public port, no key', url: () => `${gateway.url}/metrics`, status: 404, code: 'not_found' },
    {
      name: 'the gateway public port, HEAD',
      url: () => `${gateway.url}/metrics`,
      method: 'HEAD',
      status: 404,
      code: '',
    },
    {
      name: 'the gateway admin port',
      url: () => `http://127.0.0.1:${adminPort}/metrics`,
      status: 401,
      code: 'unauthorized',
    },
    { name: 'the pets port', url: () => `${pets.url}/metrics`, status: 404, code: 'not_found' },
  ];
  it.each(cases)('$name → $status', async ({ url, method, status, code }) => {
    const res = await fetch(url(), { method: method ?? 'GET' });
    if (method === 'HEAD') expect(res.status).toBe(status);
    else await expectError(res, status, code);
  });
});

describe('the metrics listener', () => {
  const services = [
    {
      name: 'gateway',
      service: () => gateway,
      own: 'gateway_rate_limit_decisions_total',
      route: '/v1/pets',
      status: '401',
    },
    {
      name: 'pets',
      service: () => pets,
      own: 'pets_store_operation_duration_seconds',
      route: '/v1/pets',
      status: '200',
    },
  ];
  it.each(services)(
    '$name: GET /metrics → 200 Prometheus text with its request series',
    async ({ service, own, route, status }) => {
      const res = await fetch(`${service().metricsUrl}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const text = await res.text();
      expect(text).toContain(`# TYPE ${own}`);
      expect(metricValue(text, 'http_requests_total', { route, status })).toBeGreaterThanOrEqual(1);
      // Scrapes are not traffic: the metrics listener's own requests are not in the series.
      expect(text).not.toMatch(/http_requests_total\{[^}]*route="\/metrics"/);
    },
  );

  it.each(services)('$name: the API is not served there → 404', async ({ service }) => {
    await expectError(await fetch(`${service().metricsUrl}/v1/pets`), 404, 'not_found');
  });
});
