// The same load spread over 1, 1,000 and 100,000 distinct keys, for `npm run bench`: one gateway
// process (its default settings and log level) with all of them in its keys file, so the three
// differ only in how many keys the traffic touches. Keys come from the product's own factory.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { rssBytes } from './processes.mjs';
import { cannon } from './rounds.mjs';

export const KEY_COUNTS = [1, 1_000, 100_000];

/** Subject names: `gateway` for one key (the ratios' denominator), then `gateway1kKeys`, `gateway100kKeys`. */
export const keysSubject = (n) => (n === 1 ? 'gateway' : `gateway${n >= 1000 ? `${n / 1000}k` : n}Keys`);

/**
 * Writes a keys file of disjoint sets, one per count, on a default plan (enterprise: a minute and a
 * day window, like every default plan) with limits no run reaches. Returns the file and, per
 * count, the Authorization headers of its set.
 */
export function writeManyKeys(dir) {
  const entries = [];
  const sets = {};
  for (const n of KEY_COUNTS) {
    sets[n] = [];
    for (let i = 0; i < n; i++) {
      const { key, record } = createKey({
        plan: 'enterprise',
        name: `bench ${n}-${i}`,
        limits: { perMinute: 1e9, perDay: 1e9 },
      });
      entries.push(toKeyFileEntry(record));
      sets[n].push(`Bearer ${key}`);
    }
  }
  const file = join(dir, 'keys-many.json');
  writeFileSync(file, JSON.stringify(entries));
  return { file, sets };
}

/**
 * autocannon options for GET /v1/pets on `url` that take the keys of `authorizations` in turn,
 * request after request: every key of the set is active once the run has sent as many requests.
 */
export function rotating(url, authorizations) {
  let next = 0;
  return {
    url,
    requests: [
      {
        method: 'GET',
        path: '/v1/pets?limit=20',
        setupRequest: (req) => {
          req.headers = { ...req.headers, authorization: authorizations[next++ % authorizations.length] };
          return req;
        },
      },
    ],
  };
}

/** Redis's `used_memory` (INFO memory), in bytes. */
export async function usedMemory(admin) {
  return Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))?.[1]);
}

/**
 * Sends each set's keys once, the smallest set first, and reads Redis's used memory and the
 * gateway's RSS after each: what a key costs once it is active (its windows, ban counter and usage
 * history in Redis; what the gateway process grows by). Returns the readings and the per-key figures.
 */
export async function primeKeys({ admin, gateway, sets, connections }) {
  const readings = { 0: { redisBytes: await usedMemory(admin), gatewayRssBytes: rssBytes(gateway.process.pid) } };
  // Keyed by how many of the keys have been sent so far (0: none), in that order.
  for (const n of KEY_COUNTS) {
    const r = await cannon({ ...rotating(gateway.url, sets[n]), connections: Math.min(connections, n), amount: n });
    if (r['2xx'] !== n) throw new Error(`priming ${n} keys: ${JSON.stringify(r.statusCodeStats)} errors=${r.errors}`);
    readings[n] = { redisBytes: await usedMemory(admin), gatewayRssBytes: rssBytes(gateway.process.pid) };
  }
  // The largest set's step: its keys all became active. The keys file's keys are held apart from
  // the cache, so the RSS step is the collector's slack and per-key state, not cache entries.
  const [, mid, top] = KEY_COUNTS;
  return {
    readings,
    redisBytesPerActiveKey: Math.round((readings[top].redisBytes - readings[mid].redisBytes) / top),
    gatewayRssBytesPerActiveKey: Math.round((readings[top].gatewayRssBytes - readings[mid].gatewayRssBytes) / top),
  };
}

/** The heap one entry of the gateway's key cache takes, full, at `entries` (bench/key-cache-memory.mjs). */
export function keyCacheBytes(entries) {
  const out = execFileSync(process.execPath, ['--expose-gc', 'bench/key-cache-memory.mjs', String(entries)], {
    encoding: 'utf8',
  });
  return JSON.parse(out).bytesPerEntry;
}
