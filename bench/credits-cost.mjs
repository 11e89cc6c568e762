// The cost of credits on the hot path, for `npm run bench` (issue 40): one gateway process, its
// customers made through its own admin API, half of them spending credits from a balance no run
// exhausts and half without credits, each customer with one key. The two sets get the same seeded
// Zipf traffic in alternating rounds of the same process, so the difference is the credits' own
// (two gateway processes differ by a fifth on this host whatever they run).
import { randomUUID } from 'node:crypto';
import { freePort } from './processes.mjs';
import { roundsOf, zipfRequests } from './traffic.mjs';
import { trafficPlan } from './zipf.mjs';

const LIMITS = { perMinute: 1e9, perDay: 1e9 };

/**
 * One admin call, tried again after a 503 (a Redis command that outlasted its timeout on a busy
 * host); the `Idempotency-Key` makes a retried top-up add once.
 */
async function adminCall(base, token, method, path, body) {
  const idempotencyKey = randomUUID();
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'idempotency-key': idempotencyKey,
      },
      body: JSON.stringify(body),
    });
    const json = await res.json();
    if (res.status === 201) return json;
    if (res.status !== 503 || attempt === 5)
      throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** `count` customers of one key each; with `credits`, terms without a refill and a large top-up. */
async function makeCustomers(base, token, count, credits) {
  const authorizations = new Array(count);
  let next = 0;
  // A few at a time: the admin listener limits nothing here, and one at a time takes minutes.
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const customer = await adminCall(base, token, 'POST', '/admin/customers', {
        name: `bench ${credits ? 'credits' : 'plain'} ${i}`,
        plan: 'enterprise',
        limits: LIMITS,
        ...(credits && { credits: {} }),
      });
      const key = await adminCall(base, token, 'POST', '/admin/keys', { customerId: customer.id, limits: LIMITS });
      if (credits) {
        await adminCall(base, token, 'POST', `/admin/customers/${customer.id}/credits`, {
          amount: 100_000_000_000,
          reason: 'bench',
        });
      }
      authorizations[i] = `Bearer ${key.key}`;
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return authorizations;
}

/**
 * `rates`: the fixed rates to measure at (saturation too). Returns per set and load what
 * traffic.mjs measures, and the ratios credits/plain of CPU and Redis commands per request.
 */
export async function creditsCost({ startGateway, redis, admin, opts, loadAverage }) {
  const token = `bench-${randomUUID()}`;
  const adminPort = await freePort();
  const gateway = await startGateway(
    {
      REDIS_URL: redis.url,
      // Keys and customers in memory through the admin API: a keys file's customers hold no credits.
      API_KEYS_FILE: undefined,
      ADMIN_TOKEN: token,
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      PORTAL_PORT: String(await freePort()),
    },
    undefined,
  );
  const base = `http://127.0.0.1:${adminPort}`;
  const count = opts.creditCustomers;
  const sets = {
    credits: await makeCustomers(base, token, count, true),
    plain: await makeCustomers(base, token, count, false),
  };
  const plan = trafficPlan({ n: count, s: opts.s, seed: opts.seed, postShare: opts.postShare });
  const list = Object.entries(sets).map(([name, authorizations]) => ({
    name,
    process: gateway.process,
    usesRedis: true,
    requests: zipfRequests(gateway.url, plan, (rank) => authorizations[rank]),
  }));
  const ctx = { ...opts.load, admin, redisPid: redis.pid, loadAverage };
  const result = { customers: count, loadAverage: { start: loadAverage() }, loads: {} };
  result.loads.saturation = await roundsOf(list, {}, ctx, 'credits at saturation');
  for (const rate of opts.rates) result.loads[rate] = await roundsOf(list, { rate }, ctx, `credits at ${rate} req/s`);
  result.loadAverage.end = loadAverage();
  result.redisIdleUsPerSecond = ctx.redisIdleUsPerSecond;
  // credits ÷ plain per load: what spending credits adds, the same process and traffic.
  const ratio = (a, b) => (a === null || b === null || b === 0 ? null : Number((a / b).toFixed(3)));
  result.ratios = Object.fromEntries(
    Object.entries(result.loads).map(([load, { credits, plain }]) => [
      load,
      {
        cpuProcess: ratio(credits.cpuProcessUs, plain.cpuProcessUs),
        cpuRedis: ratio(credits.cpuRedisUs, plain.cpuRedisUs),
        redisCommands: ratio(credits.redisCommandsPerRequest, plain.redisCommandsPerRequest),
        redisCalls: ratio(credits.redisCallsPerRequest, plain.redisCallsPerRequest),
      },
    ]),
  );
  return result;
}
