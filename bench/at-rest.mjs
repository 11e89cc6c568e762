// npm run bench:at-rest [-- --keys 100000 --seconds 180 --connections 32]
// What the gateway and its Redis spend with no traffic at all, after N keys have each sent one
// request: the work that scales with the keys a deployment has served, not with its requests
// (the metering closer's passes, the usage history's and the limiter's timers). Starts the bench's
// pets service, a Redis of its own and the gateway as users run it with N lone keys in its keys
// file, sends each key once (so every key is active today), then reads, with nothing sent, the
// CPU of the gateway and of Redis and the commands Redis ran (INFO commandstats), minute by minute.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { Redis } from 'ioredis';
import { rotating } from './many-keys.mjs';
import { cpuMicros, freePort, start, startRedis, stopAll, waitFor } from './processes.mjs';
import { cannon } from './rounds.mjs';

const { values: args } = parseArgs({
  options: {
    keys: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '180' },
    connections: { type: 'string', default: '32' },
  },
});

/** Every command Redis has run so far, scripts' own calls included (INFO commandstats). */
async function commandsRun(admin) {
  const text = await admin.info('commandstats');
  let total = 0;
  for (const m of text.matchAll(/cmdstat_[a-z|_-]+:calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-at-rest-'));
  const n = Number(args.keys);
  const keys = Array.from({ length: n }, (_, i) =>
    createKey({ plan: 'enterprise', name: `at-rest ${i}`, limits: { perMinute: 1e9, perDay: 1e9 } }),
  );
  const keysFile = join(dir, 'keys.json');
  writeFileSync(keysFile, JSON.stringify(keys.map((k) => toKeyFileEntry(k.record))));
  const redis = await startRedis();
  const petsPort = await freePort();
  start('pets', process.execPath, ['services/pets/dist/server.js'], {
    PORT: String(petsPort),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
  });
  const petsUrl = `http://127.0.0.1:${petsPort}`;
  await waitFor(`${petsUrl}/readyz`);
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
  const primed = await cannon({
    ...rotating(url, keys.map((k) => `Bearer ${k.key}`)),
    connections: Number(args.connections),
    amount: n,
  });
  process.stdout.write(`${n} keys sent once each (${primed.non2xx} not 2xx); now nothing is sent\n`);
  const admin = new Redis(redis.url);
  const read = async () => ({
    at: performance.now(),
    gateway: cpuMicros(gateway.pid),
    redis: cpuMicros(redis.pid),
    commands: await commandsRun(admin),
  });
  const start0 = await read();
  let last = start0;
  const rows = [];
  const seconds = Number(args.seconds);
  for (let s = 10; s <= seconds; s += 10) {
    await new Promise((resolve) => setTimeout(resolve, start0.at + s * 1000 - performance.now()));
    const now = await read();
    rows.push({
      s,
      gatewayMs: Math.round((now.gateway - last.gateway) / 1000),
      redisMs: Math.round((now.redis - last.redis) / 1000),
      // Less the one INFO this reading sent.
      commands: now.commands - last.commands - 1,
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
    process.stderr.write(`bench:at-rest failed: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
