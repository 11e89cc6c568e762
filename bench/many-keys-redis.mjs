// npm run bench:many-keys-redis [-- --keys 100000 --rate 2000 --rounds 5 --duration 5 --rest 180]
// What one key and N keys cost Redis, on a Redis that serves nothing else, and what stays at rest.
// The full bench's Redis figures share one Redis among all its subjects, and the keys and
// customers of its earlier sections expire and get swept while later ones are measured (its idle
// readings swing from 0 to 230 ms of Redis CPU a second). Here: the bench's pets service, a Redis
// of its own and the gateway as users run it with 1 + N lone keys in its keys file; the N keys sent
// once each; then rounds at a fixed rate, one key's requests and the N keys' in turn alternating,
// each with the CPU µs per request of the gateway and of Redis and the commands Redis ran (INFO
// commandstats, scripts' own calls included) per request; then nothing sent for --rest seconds:
// the work that scales with the keys a deployment has served, not with its requests (expiry of
// their counters, the metering closer's passes, the timers), minute by minute.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { Redis } from 'ioredis';
import { rotating } from './many-keys.mjs';
import { cpuMicros, freePort, start, startRedis, stopAll, waitFor } from './processes.mjs';
import { commandCounters, countersDelta } from './redis-commands.mjs';
import { cannon } from './rounds.mjs';
import { startPets } from './subjects.mjs';

const { values: args } = parseArgs({
  options: {
    keys: { type: 'string', default: '100000' },
    rate: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '5' },
    rest: { type: 'string', default: '180' },
    connections: { type: 'string', default: '32' },
  },
});

/** Every command Redis ran between two readings, scripts' own calls included. */
const commandsBetween = (before, after) => Object.values(countersDelta(before, after)).reduce((n, d) => n + d.calls, 0);

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-at-rest-'));
  const n = Number(args.keys);
  const keys = Array.from({ length: n + 1 }, (_, i) =>
    createKey({ plan: 'enterprise', name: `at-rest ${i}`, limits: { perMinute: 1e9, perDay: 1e9 } }),
  );
  const keysFile = join(dir, 'keys.json');
  writeFileSync(keysFile, JSON.stringify(keys.map((k) => toKeyFileEntry(k.record))));
  const redis = await startRedis();
  const { url: petsUrl } = await startPets();
  const port = await freePort();
  const gateway = start('gateway', process.execPath, ['services/gateway/dist/server.js'], {
    PORT: String(port),
    HOST: '127.0.0.1',
    PETS_URL: petsUrl,
    REDIS_URL: redis.url,
    API_KEYS_FILE: keysFile,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/readyz`);
  const [one, ...many] = keys.map((k) => `Bearer ${k.key}`);
  const connections = Number(args.connections);
  const primed = await cannon({ ...rotating(url, many), connections, amount: n });
  process.stdout.write(`${n} keys sent once each (${primed.non2xx} not 2xx)\n`);
  const admin = new Redis(redis.url);
  const loads = { oneKey: rotating(url, [one]), manyKeys: rotating(url, many) };
  const perRound = { oneKey: [], manyKeys: [] };
  for (const load of Object.values(loads))
    await cannon({ ...load, connections, overallRate: Number(args.rate), duration: 1 });
  for (let round = 0; round < Number(args.rounds); round++) {
    // Alternating, the first of each round swapped every round: drift in the host hits both alike.
    const order = round % 2 ? ['manyKeys', 'oneKey'] : ['oneKey', 'manyKeys'];
    for (const name of order) {
      const before = [cpuMicros(gateway.pid), cpuMicros(redis.pid), await commandCounters(admin)];
      const r = await cannon({
        ...loads[name],
        connections,
        overallRate: Number(args.rate),
        duration: Number(args.duration),
      });
      const count = r.requests.total;
      const after = [cpuMicros(gateway.pid), cpuMicros(redis.pid), await commandCounters(admin)];
      perRound[name].push({
        gateway: (after[0] - before[0]) / count,
        redis: (after[1] - before[1]) / count,
        commands: commandsBetween(before[2], after[2]) / count,
        non2xx: r.non2xx,
      });
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const fixed = (x, d = 1) => Number(x.toFixed(d));
  process.stdout.write(`at ${args.rate} req/s, ${args.rounds} rounds of ${args.duration} s (median; per round)\n`);
  process.stdout.write('                 gateway CPU µs   Redis CPU µs   Redis commands   per round (gateway+Redis)\n');
  for (const [name, rs] of Object.entries(perRound)) {
    process.stdout.write(
      `  ${name.padEnd(12)}${String(fixed(median(rs.map((r) => r.gateway)))).padStart(17)}${String(fixed(median(rs.map((r) => r.redis)))).padStart(15)}${String(fixed(median(rs.map((r) => r.commands)), 2)).padStart(17)}   ${rs.map((r) => `${fixed(r.gateway)}+${fixed(r.redis)}`).join(' ')}\n`,
    );
  }
  const ratio = (field) =>
    fixed(median(perRound.manyKeys.map((r) => r[field])) / median(perRound.oneKey.map((r) => r[field])), 2);
  process.stdout.write(
    `  ${n} keys ÷ one key: gateway ${ratio('gateway')}, Redis ${ratio('redis')}, Redis commands ${ratio('commands')}\n`,
  );
  process.stdout.write(`now nothing is sent for ${args.rest} s\n`);
  const read = async () => ({
    at: performance.now(),
    gateway: cpuMicros(gateway.pid),
    redis: cpuMicros(redis.pid),
    commands: await commandCounters(admin),
  });
  const start0 = await read();
  let last = start0;
  const rows = [];
  const seconds = Number(args.rest);
  for (let s = 10; s <= seconds; s += 10) {
    await new Promise((resolve) => setTimeout(resolve, start0.at + s * 1000 - performance.now()));
    const now = await read();
    rows.push({
      s,
      gatewayMs: Math.round((now.gateway - last.gateway) / 1000),
      redisMs: Math.round((now.redis - last.redis) / 1000),
      commands: commandsBetween(last.commands, now.commands),
    });
    last = now;
  }
  admin.disconnect();
  await stopAll();
  process.stdout.write('seconds at rest   gateway CPU ms   Redis CPU ms   Redis commands   (each 10 s)\n');
  for (const r of rows) {
    process.stdout.write(
      `${String(r.s).padStart(15)}${String(r.gatewayMs).padStart(17)}${String(r.redisMs).padStart(15)}${String(r.commands).padStart(17)}\n`,
    );
  }
  const total = (field) => rows.reduce((sum, r) => sum + r[field], 0);
  const perMinute = (x) => Math.round((x * 60) / seconds);
  process.stdout.write(
    `per minute at rest: gateway ${perMinute(total('gatewayMs'))} ms CPU, Redis ${perMinute(total('redisMs'))} ms CPU, ${perMinute(total('commands'))} Redis commands\n`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench:many-keys-redis failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
