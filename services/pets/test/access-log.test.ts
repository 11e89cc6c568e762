import { createRegistry } from '@animal-store/common/metrics.js';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { MemoryPetStore } from '../src/store/memory-pet-store.js';
import type { App } from './helpers.js';

/** One line per request at info, with the key id and trace the gateway forwarded. */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
let app: App | undefined;

function logging(): { app: App; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  app = buildApp(
    { logLevel: 'info' },
    {
      store: new MemoryPetStore(),
      registry: createRegistry('pets', false),
      logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    },
  );
  return { app, lines };
}

afterEach(async () => {
  await app?.close();
});

describe('the pets access line', () => {
  const cases = [
    {
      name: 'a request from the gateway',
      url: '/v1/pets?limit=5&status=available',
      headers: { 'x-api-key-id': 'key_abc', traceparent: `00-${TRACE}-00f067aa0ba902b7-01` },
      expected: { status: 200, keyId: 'key_abc', traceId: TRACE },
    },
    {
      name: 'a refused request (bad query)',
      url: '/v1/pets?limit=0&token=s3cr3t',
      headers: { 'x-api-key-id': 'key_abc', traceparent: `00-${TRACE}-00f067aa0ba902b7-01` },
      expected: { status: 400, keyId: 'key_abc', traceId: TRACE },
    },
    {
      name: 'a direct request without trace or key',
      url: '/v1/pets/12',
      headers: {},
      expected: { status: 404, traceId: expect.stringMatching(/^[0-9a-f]{32}$/) },
    },
  ];
  it.each(cases)('$name → one line at info, path without query', async ({ url, headers, expected }) => {
    const { app: pets, lines } = logging();
    await pets.ready();
    const before = lines.length;
    const res = await pets.inject({ url, headers });
    expect(res.statusCode).toBe(expected.status);
    const after = lines.slice(before);
    expect(after).toHaveLength(1);
    expect(after[0]).toMatchObject({
      level: 30,
      msg: 'request',
      service: 'pets',
      method: 'GET',
      path: url.split('?')[0],
      reqId: res.headers['x-request-id'],
      ...expected,
    });
    expect(typeof after[0]?.ms).toBe('number');
    if (!('keyId' in expected)) expect(after[0]).not.toHaveProperty('keyId');
    expect(JSON.stringify(after)).not.toContain('s3cr3t');
  });
});
