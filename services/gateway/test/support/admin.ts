import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, expect } from 'vitest';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import {
  ADMIN_TOKEN,
  bearer,
  type GatewayOptions,
  startEchoUpstream,
  startGateway,
  type TestGateway,
} from './helpers.js';

// What the admin API's tests share: the token's header, the keys they create, the Error check, an
// upstream and a gateway for a file or a describe block, calls as the operator, the credit routes'
// replicas.

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

/** An admin API call as the operator (the admin token's header, then `headers`), with a JSON body if given. */
export type AdminCall = (
  method: string,
  url: string,
  payload?: object,
  headers?: Record<string, string>,
) => Promise<LightMyRequestResponse>;

/** Calls `gw`'s admin API as the operator. */
export const adminCaller =
  (gw: TestGateway): AdminCall =>
  (method, url, payload, headers = {}) =>
    gw.admin.inject({
      method: method as 'GET',
      url,
      headers: { ...auth, ...headers },
      ...(payload ? { payload } : {}),
    });

/**
 * The credit routes' gateways, with a ban threshold of 3: two replicas on the file's Redis (one
 * prefix, and one key and one customer store standing in for MongoDB), or with `redis: false`
 * one gateway in the embedded mode. `gateways` is the file's useGateways().
 */
export async function creditReplicas(
  gateways: { start(options: GatewayOptions): Promise<TestGateway> },
  options: { redis?: boolean; now?: () => number } = {},
): Promise<TestGateway[]> {
  const keyStore = new MemoryKeyStore();
  const customerStore = new MemoryCustomerStore();
  const prefix = `cr${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  const env = { BAN_THRESHOLD: '3' };
  const now = options.now ? { now: options.now } : {};
  if (options.redis === false) return [await gateways.start({ redisUrl: null, env, ...now })];
  const make = () => gateways.start({ prefix, env, keyStore, customerStore, ...now });
  return [await make(), await make()];
}
