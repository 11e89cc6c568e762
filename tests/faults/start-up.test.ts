import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/runtime.js';
import { runToExit, type SERVERS } from '../support/service-process.js';

/**
 * What an operator sees when a service cannot start for a reason of its environment: a port
 * taken, two listeners on one port, an address that is no address, MongoDB out of reach. Each is
 * the service's own process (dist/server.js), and each ends with exit 1 and one line naming the
 * variable and what to do: no stack trace, no JSON record to dig the reason out of.
 */

/** A port something else listens on, as another program would hold it. */
let held: Server;
let heldPort: number;
/** A port where nothing listens: MongoDB "there" refuses every connection. */
let deadPort: number;

beforeAll(async () => {
  held = createServer();
  held.listen({ host: '127.0.0.1', port: await freePort() });
  await once(held, 'listening');
  heldPort = (held.address() as { port: number }).port;
  deadPort = await freePort();
});

afterAll(async () => {
  held?.close();
});

const ADMIN = { ADMIN_TOKEN: 'start-up-admin-token-0123456789' };
/** Production needs a Redis: the shared one, under a prefix of this file's (nothing is written before the failure). */
const PRODUCTION = { NODE_ENV: 'production', REDIS_URL: 'redis://127.0.0.1:6379', REDIS_PREFIX: 'startup-test:' };
const deadMongo = () => `mongodb://ops:hunter2@127.0.0.1:${deadPort}/?directConnection=true`;

interface Case {
  name: string;
  service: keyof typeof SERVERS;
  env: () => Record<string, string>;
  /** Every line of the output that is not a JSON log record. */
  lines: () => string[];
}

const configReport = (service: string, problem: string) => [`${service}: invalid configuration:`, `  - ${problem}`];

const cases: Case[] = [
  {
    name: 'gateway: PORT already in use',
    service: 'gateway',
    env: () => ({ PORT: String(heldPort) }),
    lines: () => [
      `gateway: PORT=${heldPort}: 127.0.0.1:${heldPort} is already in use (EADDRINUSE); stop what listens there or set PORT to a free port`,
    ],
  },
  {
    name: 'gateway: ADMIN_PORT already in use (after the public listener opened)',
    service: 'gateway',
    env: () => ({ ...ADMIN, PORT: '0', ADMIN_HOST: '127.0.0.1', ADMIN_PORT: String(heldPort) }),
    lines: () => [
      `gateway: ADMIN_PORT=${heldPort}: 127.0.0.1:${heldPort} is already in use (EADDRINUSE); stop what listens there or set ADMIN_PORT to a free port`,
    ],
  },
  {
    name: 'gateway: ADMIN_HOST not an address of this machine',
    service: 'gateway',
    env: () => ({ ...ADMIN, PORT: '0', ADMIN_HOST: '192.0.2.1', ADMIN_PORT: '0' }),
    lines: () => [
      'gateway: ADMIN_HOST=192.0.2.1 is not an address of this machine (EADDRNOTAVAIL); set ADMIN_HOST to one of its addresses, 0.0.0.0 for all of them',
    ],
  },
  {
    name: 'gateway: PORT equal to ADMIN_PORT',
    service: 'gateway',
    env: () => ({ ...ADMIN, PORT: '18081', ADMIN_PORT: '18081' }),
    lines: () => configReport('gateway', 'PORT and ADMIN_PORT are both 18081: give each listener its own port'),
  },
  {
    name: 'gateway: PORTAL_PORT equal to METRICS_PORT',
    service: 'gateway',
    env: () => ({ ...ADMIN, PORT: '0', ADMIN_PORT: '0', PORTAL_PORT: '19464', METRICS_PORT: '19464' }),
    lines: () =>
      configReport('gateway', 'PORTAL_PORT and METRICS_PORT are both 19464: give each listener its own port'),
  },
  {
    name: 'gateway: HOST=300.1.1.1',
    service: 'gateway',
    env: () => ({ PORT: '0', HOST: '300.1.1.1' }),
    lines: () =>
      configReport(
        'gateway',
        'HOST must be an IP address or a host name (0.0.0.0: every address; 127.0.0.1: this machine only), got "300.1.1.1"',
      ),
  },
  {
    name: 'gateway: MONGO_URL unreachable in production',
    service: 'gateway',
    env: () => ({ ...PRODUCTION, ...ADMIN, PORT: '0', ADMIN_PORT: '0', MONGO_URL: deadMongo() }),
    lines: () => [
      `gateway: MONGO_URL=mongodb://ops:***@127.0.0.1:${deadPort}/: MongoDB cannot be reached (connect ECONNREFUSED 127.0.0.1:${deadPort}); start it, or set MONGO_URL to a server this machine reaches`,
    ],
  },
  {
    name: 'pets: PORT already in use',
    service: 'pets',
    env: () => ({ PORT: String(heldPort) }),
    lines: () => [
      `pets: PORT=${heldPort}: 127.0.0.1:${heldPort} is already in use (EADDRINUSE); stop what listens there or set PORT to a free port`,
    ],
  },
  {
    name: 'pets: PORT equal to METRICS_PORT',
    service: 'pets',
    env: () => ({ PORT: '18090', METRICS_PORT: '18090' }),
    lines: () => configReport('pets', 'PORT and METRICS_PORT are both 18090: give each listener its own port'),
  },
  {
    name: 'pets: HOST=300.1.1.1',
    service: 'pets',
    env: () => ({ PORT: '0', HOST: '300.1.1.1' }),
    lines: () =>
      configReport(
        'pets',
        'HOST must be an IP address or a host name (0.0.0.0: every address; 127.0.0.1: this machine only), got "300.1.1.1"',
      ),
  },
  {
    name: 'pets: MONGO_URL unreachable in production',
    service: 'pets',
    env: () => ({ NODE_ENV: 'production', PORT: '0', MONGO_URL: deadMongo() }),
    lines: () => [
      `pets: MONGO_URL=mongodb://ops:***@127.0.0.1:${deadPort}/: MongoDB cannot be reached (connect ECONNREFUSED 127.0.0.1:${deadPort}); start it, or set MONGO_URL to a server this machine reaches`,
    ],
  },
];

describe('a service that cannot start says why in one line and exits 1', () => {
  // The gateway waits out an election for MongoDB (SERVER_SELECTION_TIMEOUT_MS, 15 s) before it
  // says the server is out of reach: the bound leaves room for that and a loaded machine.
  it.each(cases)('$name', { timeout: 50_000 }, async ({ service, env, lines }) => {
    const result = await runToExit(service, env(), 40_000);
    const output = result.logs.map((l) => l.raw).join('\n');
    expect(result.killedByBound, output).toBe(false);
    expect(result.code, output).toBe(1);
    expect(result.logs.filter((l) => l.json === null).map((l) => l.raw)).toEqual(lines());
    // Nothing else reports the failure: no fatal record, no stack, and the password stays hidden.
    expect(result.logs.filter((l) => Number(l.json?.level) >= 50)).toEqual([]);
    expect(output).not.toMatch(/^\s+at /m);
    expect(output).not.toContain('hunter2');
  });
});
