import { describe, expect, it, vi } from 'vitest';
import { addKey, bearer, useGateways } from './support/helpers.js';

const gateways = useGateways();

describe('load shedding on the gateway', () => {
  it('answers 503 overloaded with Retry-After and exhausted rate-limit headers before any key work; /healthz still answers', async () => {
    // A heap threshold every process is past: the gateway sheds from its first load sample on.
    const gw = await gateways.start({ env: { OVERLOAD_HEAP_USED_MB: '1' } });
    const { key } = await addKey(gw.deps, 'pro');
    await vi.waitFor(async () => expect((await gw.app.inject({ url: '/v1/pets' })).statusCode).toBe(503), {
      timeout: 3_000,
      interval: 50,
    });
    for (const headers of [{}, bearer(key)]) {
      const before = Date.now();
      const res = await gw.app.inject({ url: '/v1/pets', headers });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({
        code: 'overloaded',
        message: 'The service is overloaded; retry in 2 s',
        status: 503,
      });
      expect(res.headers['retry-after']).toBe('2');
      expect(res.headers['x-ratelimit-limit']).toBe('60');
      expect(res.headers['x-ratelimit-remaining']).toBe('0');
      const reset = Number(res.headers['x-ratelimit-reset']);
      expect(reset).toBeGreaterThanOrEqual(Math.floor(before / 1000) + 2);
      expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 2);
    }
    // Shed before the gate: the key was never looked up or counted.
    expect(await gw.deps.registry.metrics()).not.toMatch(/gateway_rate_limit_decisions_total\{/);
    expect((await gw.app.inject({ url: '/healthz' })).statusCode).toBe(200);
  });

  it('refuses thresholds that are not numbers at start', async () => {
    await expect(gateways.start({ env: { OVERLOAD_EVENT_LOOP_DELAY_MS: 'soon' } })).rejects.toThrow(
      /OVERLOAD_EVENT_LOOP_DELAY_MS must be an integer/,
    );
  });
});
