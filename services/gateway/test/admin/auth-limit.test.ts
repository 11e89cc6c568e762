import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, expectError, useEchoUpstream } from '../support/admin.js';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '../support/helpers.js';

// Failed admin authentication, limited per address (admin/auth-limit.ts).
const upstream = useEchoUpstream();

describe('failed admin authentication is limited per address', () => {
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

  const cases = [
    { name: 'the 11th wrong token', headers: wrong },
    { name: 'the right token after 10 wrong ones (not even checked)', headers: auth },
    { name: 'no token at all', headers: {} },
  ];
  it.each(cases.map((c, i) => ({ ...c, address: `198.51.100.${i + 1}` })))(
    '$name → 429 admin_rate_limited with Retry-After until the minute ends',
    async ({ headers, address }) => {
      const started = clock;
      expect(await fail(address, 10)).toEqual(Array(10).fill(401));
      clock = started + 15_000;
      const res = await send(address, headers);
      expectError(res, 429, 'admin_rate_limited');
      expect(res.headers['retry-after']).toBe('45');
      // Other addresses are not affected.
      expect((await send('203.0.113.50', auth)).statusCode).toBe(200);
      // Once the minute since the first failure is over, the right token works again.
      clock = started + 60_000;
      expect((await send(address, auth)).statusCode).toBe(200);
    },
  );

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
