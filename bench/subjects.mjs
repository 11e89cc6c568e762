// The subjects `npm run bench` compares, started on loopback in front of one pets service:
//   direct        the pets service itself (in-memory store)
//   bareProxy     fastify + @fastify/http-proxy, nothing else (bench/bare-proxy.mjs)
//   gateway       the gateway as a user runs it: its default log level (info), real Redis
//   gatewayQuiet  the same gateway with LOG_LEVEL=warn
//   gatewayToFile the gateway at its default log level with stdout to a file (`node … > app.log`)
//   gatewayCustomer the gateway as users run it, its key one of a customer's (bench/many-customers.mjs)
//   peer          fastify + @fastify/http-proxy + @fastify/rate-limit on the same Redis (bench/peer.mjs)
// and with --against REF, gatewayAgainst: the gateway of commit REF as users run it (bench/against.mjs)
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { writeCustomerKeys } from './many-customers.mjs';
import { freePort, start, waitFor } from './processes.mjs';

export const SUBJECTS = ['direct', 'bareProxy', 'gateway', 'gatewayQuiet', 'gatewayToFile', 'gatewayCustomer', 'peer'];

const local = (port) => `http://127.0.0.1:${port}`;

/** Gateway keys: one whose limits never refuse during a run, one over its limit, one banned. */
function writeKeys(dir) {
  const open = createKey({ plan: 'enterprise', name: 'bench open', limits: { perMinute: 1e9, perDay: 1e9 } });
  const limited = createKey({ plan: 'enterprise', name: 'bench limited', limits: { perMinute: 1, perDay: 1e9 } });
  const banned = createKey({ plan: 'free', name: 'bench banned' });
  const entries = [open, limited, banned].map((k) => toKeyFileEntry(k.record));
  writeFileSync(join(dir, 'keys.json'), JSON.stringify(entries));
  return { open: open.key, limited: limited.key, banned: banned.key, bannedId: banned.record.id };
}

/** The bench's pets service (in memory, at warn) seeded with 40 pets: its URL and process. */
export async function startPets() {
  const port = await freePort();
  // At warn for every subject: pets is the upstream of all five, and the comparison is of what
  // sits in front of it.
  const child = start('pets', process.execPath, ['services/pets/dist/server.js'], {
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
  });
  await waitFor(`${local(port)}/readyz`);
  for (let i = 0; i < 40; i++) {
    await fetch(`${local(port)}/v1/pets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: `pet-${i}`, categoryId: i % 5, status: 'available' }),
    });
  }
  return { url: local(port), process: child };
}

/**
 * Starts every subject. Returns, per subject, its base URL, child process and the headers its
 * requests carry; the gateway's keys and Redis prefix; and `startGateway` for more gateways on the
 * same pets and keys.
 */
export async function startSubjects({ redis, dir, against }) {
  const pets = await startPets();
  const keys = writeKeys(dir);
  // The gateway's default prefix on the bench's own Redis, so its keys are the size users' are (the
  // memory per key counts them); a Redis of the user's (REDIS_URL) gets a prefix of the run's own.
  const prefix = redis.pid ? 'gw:' : `bench${randomUUID().slice(0, 6)}:`;
  const auth = { authorization: `Bearer ${keys.open}` };

  /**
   * `logLevel` undefined: the gateway's own default, whatever this shell exports. `stdoutFile`:
   * its stdout to that file rather than the bench's pipe. `server`: another build's entry point.
   */
  const startGateway = async (env, logLevel, stdoutFile, server = 'services/gateway/dist/server.js') => {
    const port = await freePort();
    const child = start(
      'gateway',
      process.execPath,
      [server],
      {
        PORT: String(port),
        HOST: '127.0.0.1',
        PETS_URL: pets.url,
        // One Redis mode per gateway: the topology's, not a REDIS_URL this shell may export.
        REDIS_URL: '',
        REDIS_PREFIX: prefix,
        API_KEYS_FILE: join(dir, 'keys.json'),
        LOG_LEVEL: logLevel,
        // Its Redis (and for the sliding subject, its plans and keys).
        ...env,
        // The 429 scenario measures refusals; a ban would turn it into the banned scenario.
        BAN_THRESHOLD: '1000000',
      },
      { stdoutFile },
    );
    await waitFor(`${local(port)}/readyz`);
    return { url: local(port), process: child, headers: auth };
  };

  const bareProxy = async () => {
    const port = await freePort();
    const child = start('bare-proxy', process.execPath, ['bench/bare-proxy.mjs'], {
      PORT: String(port),
      PETS_URL: pets.url,
    });
    await waitFor(`${local(port)}/v1/pets`);
    return { url: local(port), process: child, headers: {} };
  };

  const peer = async () => {
    const port = await freePort();
    const child = start('peer', process.execPath, ['bench/peer.mjs'], {
      PORT: String(port),
      PETS_URL: pets.url,
      REDIS_URL: redis.url,
      // The gateway's open key, with a window that never refuses during a run.
      PEER_KEYS: JSON.stringify([[keys.open, 1e9]]),
    });
    await waitFor(`${local(port)}/v1/pets`, { headers: auth });
    return { url: local(port), process: child, headers: auth };
  };

  // The gateway subject's settings, its key one of a customer's with the same limits: the customer
  // layer's cost on the hot path (the customer's windows beside the key's, in the same call).
  const gatewayCustomer = async () => {
    const customerKeys = writeCustomerKeys(dir);
    const gateway = await startGateway({ REDIS_URL: redis.url, API_KEYS_FILE: customerKeys.file }, undefined);
    return { ...gateway, headers: { authorization: customerKeys.authorization } };
  };

  const subjects = {
    direct: { ...pets, headers: {} },
    bareProxy: await bareProxy(),
    gateway: await startGateway({ REDIS_URL: redis.url }, undefined),
    gatewayQuiet: await startGateway({ REDIS_URL: redis.url }, 'warn'),
    gatewayToFile: await startGateway({ REDIS_URL: redis.url }, undefined, join(dir, 'gateway.log')),
    gatewayCustomer: await gatewayCustomer(),
    peer: await peer(),
  };
  if (against)
    subjects.gatewayAgainst = await startGateway({ REDIS_URL: redis.url }, undefined, undefined, against.server);
  /**
   * The gateway as users run it, with one difference: its key's plan counts with sliding windows
   * (a PLANS_FILE of one plan, `metered`, whose keys carry their own limits), so the cost of the
   * sliding algorithm shows beside the fixed windows of the spec's plans.
   */
  const startSlidingGateway = async () => {
    writeFileSync(join(dir, 'plans-sliding.json'), JSON.stringify({ plans: { metered: { algorithm: 'sliding' } } }));
    const sliding = createKey({ plan: 'metered', name: 'bench sliding', limits: { perMinute: 1e9, perDay: 1e9 } });
    writeFileSync(join(dir, 'keys-sliding.json'), JSON.stringify([toKeyFileEntry(sliding.record)]));
    const gateway = await startGateway({
      REDIS_URL: redis.url,
      PLANS_FILE: join(dir, 'plans-sliding.json'),
      API_KEYS_FILE: join(dir, 'keys-sliding.json'),
    });
    return { ...gateway, headers: { authorization: `Bearer ${sliding.key}` } };
  };

  return { subjects, keys, prefix, startGateway, startSlidingGateway };
}
