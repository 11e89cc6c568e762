import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, expect } from 'vitest';
import { ADMIN_TOKEN, bearer, startEchoUpstream, startGateway, type TestGateway } from './helpers.js';

// What the admin API's tests share: the token's header, the keys they create, the Error check, an
// upstream and a gateway for a file or a describe block.

export const auth = bearer(ADMIN_TOKEN);

export const PLAN_TABLE = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
} as const;

export interface Created {
  id: string;
  key: string;
  plan: string;
  name: string;
  limits: { perMinute: number; perDay: number };
  createdAt: string;
}

/** The Error shape: exactly code, message and status, status equal to the HTTP status, JSON. */
export function expectError(res: LightMyRequestResponse, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json();
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'status']);
  expect(body.code).toBe(code);
  expect(body.status).toBe(status);
  expect(typeof body.message).toBe('string');
  expect(body.message.length).toBeGreaterThan(0);
}

export async function createKey(gw: TestGateway, payload: unknown): Promise<Created> {
  const res = await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth, payload: payload as object });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

export function pets(gw: TestGateway, key: string) {
  return gw.app.inject({ method: 'GET', url: '/v1/pets', headers: bearer(key) });
}

/** An echo upstream for the whole test file: started before its tests, closed after them. */
export function useEchoUpstream(): { readonly url: string } {
  let upstream: Awaited<ReturnType<typeof startEchoUpstream>> | undefined;
  beforeAll(async () => {
    upstream = await startEchoUpstream();
  });
  afterAll(async () => {
    await upstream?.close();
  });
  return {
    get url() {
      if (!upstream) throw new Error('the echo upstream starts in beforeAll');
      return upstream.url;
    },
  };
}

/**
 * A gateway of its own for the enclosing describe block, holding one free key: started before the
 * block's tests, closed after them.
 */
export function gatewayWithOneKey(upstream: { readonly url: string }): { gw: TestGateway; existing: Created } {
  const own = {} as { gw: TestGateway; existing: Created };
  beforeAll(async () => {
    own.gw = await startGateway({ upstream: upstream.url });
    own.existing = await createKey(own.gw, { plan: 'free' });
  });
  afterAll(async () => {
    await own.gw?.close();
  });
  return own;
}
