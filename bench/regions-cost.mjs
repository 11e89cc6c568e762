// What regions cost on the hot path, for `npm run bench -- --only regions`: the gateway as users
// run it with NATS_URL unset, the same again (a second process: two processes of one build differ
// by up to a fifth on this host, so the pair says how far apart "the same" is), and with NATS_URL
// set (its own nats-server with JetStream, REGION_SYNC_MS at its default, no other region), all
// under the same seeded Zipf traffic over many keys in interleaved rounds. Regions publish every
// live count each interval, so many keys are the case that costs.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, start, waitFor } from './processes.mjs';
import { roundsOf, writeTrafficKeys, zipfRequests } from './traffic.mjs';
import { trafficPlan } from './zipf.mjs';

/** A nats-server with JetStream on a free port, stopped with the bench's other processes. */
async function startNats() {
  const port = await freePort();
  const monitor = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'bench-nats-'));
  start('nats-server', 'nats-server', [
    '-js',
    '-a',
    '127.0.0.1',
    '-p',
    String(port),
    '-m',
    String(monitor),
    '-sd',
    store,
  ]);
  await waitFor(`http://127.0.0.1:${monitor}/healthz?js-enabled-only=true`);
  return `nats://127.0.0.1:${port}`;
}

/** Per load, each subject's figures and the ratios regions ÷ one region and the control's. */
export async function regionsCost({ startGateway, redis, admin, dir, opts, loadAverage }) {
  const written = writeTrafficKeys(dir, opts.keys, 1);
  const plan = trafficPlan({ n: opts.keys, s: opts.s, seed: opts.seed, postShare: opts.postShare });
  const env = { REDIS_URL: redis.url, API_KEYS_FILE: written.file };
  const natsUrl = await startNats();
  const started = {
    oneRegion: await startGateway(env, undefined),
    oneRegionAgain: await startGateway(env, undefined),
    regions: await startGateway({ ...env, NATS_URL: natsUrl, REGION: 'bench' }, undefined),
  };
  const list = Object.entries(started).map(([name, gateway]) => ({
    name,
    process: gateway.process,
    usesRedis: true,
    requests: zipfRequests(gateway.url, plan, (rank) => written.authorizations[rank]),
  }));
  const ctx = { ...opts.load, admin, redisPid: redis.pid, loadAverage };
  const result = { keys: opts.keys, loadAverage: { start: loadAverage() }, loads: {} };
  result.loads.saturation = await roundsOf(list, {}, ctx, 'regions at saturation');
  for (const rate of opts.rates) result.loads[rate] = await roundsOf(list, { rate }, ctx, `regions at ${rate} req/s`);
  result.loadAverage.end = loadAverage();
  const ratio = (a, b) => (a == null || b == null || b === 0 ? null : Number((a / b).toFixed(3)));
  const total = (s) => (s.cpuProcessUs ?? 0) + (s.cpuRedisUs ?? 0);
  result.ratios = Object.fromEntries(
    Object.entries(result.loads).map(([load, s]) => [
      load,
      {
        regionsCpu: ratio(total(s.regions), total(s.oneRegion)),
        controlCpu: ratio(total(s.oneRegionAgain), total(s.oneRegion)),
      },
    ]),
  );
  return result;
}
