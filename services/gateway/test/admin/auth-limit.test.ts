import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, expectError, useEchoUpstream } from '../support/admin.js';
import { ADMIN_TOKEN, startGateway, type TestGateway, useGateways } from '../support/helpers.js';

// Failed admin authentication, limited per address (admin/auth-limit.ts).
const upstream = useEchoUpstream();

describe('failed admin authentication is limited per address, never the right token', () => {
  let gw: TestGateway;
  let clock = Date.parse('2030-01-01T00:00:00Z');
  beforeAll(async () => {
    gw = await startGateway({ upstream: upstream.url, now: () => clock });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const wrong = { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}#` };
  const send = (remoteAddress: string, headers: Record<string, string>) =>
    gw.admin.inject({ method: 'GET', url: '/admin/keys', headers, remoteAddress });

  async function fail(remoteAddress: string, times: number): Promise<number[]> {
    const statuses: number[] = [];
    for (let i = 0; i < times; i++) statuses.push((await send(remoteAddress, wrong)).statusCode);
    return statuses;
  }

  it('the 11th wrong token → 429 admin_rate_limited with Retry-After until the minute ends', async () => {
    const address = '198.51.100.1';
    const started = clock;
    expect(await fail(address, 10)).toEqual(Array(10).fill(401));
    clock = started + 15_000;
    const res = await send(address, wrong);
    expectError(res, 429, 'admin_rate_limited');
    expect(res.headers['retry-after']).toBe('45');
    // Other addresses are not affected.
    expect((await send('203.0.113.50', wrong)).statusCode).toBe(401);
    // Once the minute since the first failure is over, wrong tokens are counted from zero again.
    clock = started + 60_000;
    expect(await fail(address, 10)).toEqual(Array(10).fill(401));
  });

  it('the right token after 10 wrong ones from the same address still works, before and after the 429s', async () => {
    const address = '198.51.100.2';
    expect(await fail(address, 10)).toEqual(Array(10).fill(401));
    expect((await send(address, auth)).statusCode).toBe(200);
    expectError(await send(address, wrong), 429, 'admin_rate_limited');
    expect((await send(address, auth)).statusCode).toBe(200);
    // Without a token it is the plain 401 that says how to send one: no guess, nothing counted.
    expectError(await send(address, {}), 401, 'unauthorized');
  });

  const noToken: { name: string; headers: Record<string, string> }[] = [
    { name: 'no Authorization header', headers: {} },
    { name: 'an empty Authorization header', headers: { authorization: '' } },
    { name: '"Bearer" with no token', headers: { authorization: 'Bearer ' } },
    { name: 'Basic credentials', headers: { authorization: 'Basic dXNlcjpwYXNz' } },
  ];
  it.each(noToken.map((c, i) => ({ ...c, address: `198.51.100.${50 + i}` })))(
    '20 requests with $name are 401 but no failures: the right token still works',
    async ({ headers, address }) => {
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await send(address, headers)).statusCode);
      expect(statuses).toEqual(Array(20).fill(401));
      expect((await send(address, auth)).statusCode).toBe(200);
      // Wrong tokens from the same address are still counted from zero: the 11th is refused.
      expect(await fail(address, 10)).toEqual(Array(10).fill(401));
      expectError(await send(address, wrong), 429, 'admin_rate_limited');
    },
  );

  it('counts failures within one minute only: 9 now and 9 a minute later are all 401', async () => {
    const address = '198.51.100.99';
    expect(await fail(address, 9)).toEqual(Array(9).fill(401));
    clock += 60_000;
    expect(await fail(address, 9)).toEqual(Array(9).fill(401));
    expect((await send(address, auth)).statusCode).toBe(200);
  });
});

describe('failed admin authentication counted across replicas on one Redis', () => {
  const gateways = useGateways();

  it('5 wrong tokens on each of two replicas are 10: the 11th is refused on either, the right token works on both', async () => {
    const prefix = `al${Date.now()}:`;
    const [a, b] = [await gateways.start({ prefix }), await gateways.start({ prefix })];
    const address = '198.51.100.77';
    const wrong = { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}#` };
    const send = (gw: TestGateway, headers: Record<string, string>) =>
      gw.admin.inject({ method: 'GET', url: '/admin/keys', headers, remoteAddress: address });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await send(a, wrong)).statusCode, (await send(b, wrong)).statusCode);
    expect(statuses).toEqual(Array(10).fill(401));
    expectError(await send(a, wrong), 429, 'admin_rate_limited');
    expectError(await send(b, wrong), 429, 'admin_rate_limited');
    expect((await send(a, auth)).statusCode).toBe(200);
    expect((await send(b, auth)).statusCode).toBe(200);
  });
});
