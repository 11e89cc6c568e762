import { describe, expect, it } from 'vitest';
import { addKey, bearer, useGateways } from '../support/helpers.js';

const gateways = useGateways();

/** The header's entries as name → duration in ms. */
function stages(header: unknown): Record<string, number> {
  expect(typeof header).toBe('string');
  const out: Record<string, number> = {};
  for (const entry of String(header).split(', ')) {
    const match = /^([a-z]+);dur=(\d+\.\d{3})$/.exec(entry);
    expect(match, entry).not.toBeNull();
    out[(match as RegExpExecArray)[1] as string] = Number((match as RegExpExecArray)[2]);
  }
  return out;
}

describe('Server-Timing (SERVER_TIMING)', () => {
  it('is absent by default', async () => {
    const gw = await gateways.start();
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['server-timing']).toBeUndefined();
  });

  it('names the gate, the limiter, the upstream and the response on a proxied answer when SERVER_TIMING=1', async () => {
    const gw = await gateways.start({ env: { SERVER_TIMING: '1' } });
    const { key } = await addKey(gw.deps, 'pro');
    for (const request of [
      { url: '/v1/pets', headers: bearer(key) },
      {
        method: 'POST' as const,
        url: '/v1/pets',
        headers: { ...bearer(key), 'content-type': 'application/json' },
        payload: { name: 'Rex' },
      },
    ]) {
      const res = await gw.app.inject(request);
      expect(res.statusCode).toBe(200);
      const timing = stages(res.headers['server-timing']);
      expect(Object.keys(timing)).toEqual(['gate', 'limiter', 'upstream', 'response', 'total']);
    }
  });

  it('leaves out the stages a refusal never reached', async () => {
    const gw = await gateways.start({ env: { SERVER_TIMING: '1' } });
    const { key } = await addKey(gw.deps, 'free', { perMinute: 1, perDay: 100 });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    const refused = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(refused.statusCode).toBe(429);
    expect(Object.keys(stages(refused.headers['server-timing']))).toEqual(['gate', 'limiter', 'total']);
    const keyless = await gw.app.inject({ url: '/v1/pets' });
    expect(keyless.statusCode).toBe(401);
    expect(Object.keys(stages(keyless.headers['server-timing']))).toEqual(['gate', 'total']);
  });

  it('refuses a value other than 0 or 1 at start', async () => {
    await expect(gateways.start({ env: { SERVER_TIMING: 'yes' } })).rejects.toThrow(/SERVER_TIMING/);
  });
});
