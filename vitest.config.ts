import { existsSync } from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';

const TOPOLOGY = 'tests/topology/**/*.test.ts';
/** The container tier runs only by `npm run test:containers` (vitest.containers.config.ts). */
const CONTAINERS = 'tests/containers/**/*.test.ts';

/**
 * The suites whose answers hang on UTC hours, days and months (the usage history, the limits,
 * webhooks) run a second time in a zone far from UTC, whatever the machine's: Chatham is UTC+12:45,
 * +13:45 under daylight saving, so a local hour, day or month used in place of UTC's shows there
 * even where a whole-hour zone would hide it. Tests that need a zone of their own set
 * process.env.TZ themselves and say which in their names.
 */
const FAR_ZONE = 'Pacific/Chatham';
const ZONED = [
  'limits/policy',
  'limits/windows',
  'gate/rate-limit-headers',
  'limits/engines/memory-key-limiter',
  'limits/engines/redis-key-limiter',
  'usage/usage-history',
  'usage/usage-history-stores',
  'webhooks/webhooks',
  'webhooks/retries',
].map((name) => `services/gateway/test/${name}.test.ts`);
// A moved or renamed suite must not drop out of the far-zone run unseen.
for (const file of ZONED) if (!existsSync(file)) throw new Error(`vitest.config.ts: ${file} (in ZONED) does not exist`);

/**
 * Files run one at a time, after the rest (below). Vitest's default on a 2-core machine is one
 * worker for everything: the whole run then waits on each suite's child processes, Redis servers
 * and browsers in turn, though most of that time is spent waiting, not computing.
 */
const ALONE = ['tests/faults/**/*.test.ts', 'tests/dev/**/*.test.ts', 'tests/integration/**/*.test.ts'];
/**
 * Workers for the other suites. Three on this project's 2-core CI machines: most suites wait on
 * sockets and child processes, so a third worker fills the cores the other two leave idle.
 */
const SIDE_BY_SIDE = 3;

export default defineConfig({
  // Tests import the services by package name (`@animal-store/gateway/app.js`); this condition in
  // their `exports` maps those names to the TypeScript sources the tests have always run, where
  // plain Node (scripts/start.mjs, bench) gets the built `dist`. Vitest also starts its workers
  // with it (`--conditions`), so it is named for this project: no package in node_modules uses it.
  ssr: { resolve: { conditions: ['@animal-store/source'] } },
  test: {
    environment: 'node',
    pool: 'forks',
    // A worker's files share its modules: each fork imports fastify, TypeBox, ioredis and the
    // gateway once, not once per file. Measured on the 2-core machine: the side-by-side files
    // 436 s -> 282 s, the same 3,453 tests passing. The services keep no module state (clients
    // are handed in), and a test restores what it changes of process.env and the timers.
    isolate: false,
    testTimeout: 20_000,
    hookTimeout: 60_000,
    // expect.poll waits on an event (a page rendered, a queue drained), not on a deadline. Its 1 s
    // default failed a console test in CI: 100 rows not yet drawn with three workers and Chromium
    // sharing two cores. A test's own timeout still bounds every poll.
    expect: { poll: { timeout: 10_000 } },
    reporters: ['default', './tests/support/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'suites',
          include: ['services/*/test/**/*.test.ts', 'tests/**/*.test.ts'],
          exclude: [...configDefaults.exclude, TOPOLOGY, CONTAINERS, ...ALONE],
          maxWorkers: SIDE_BY_SIDE,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: `TZ=${FAR_ZONE}`,
          include: ZONED,
          env: { TZ: FAR_ZONE },
          maxWorkers: SIDE_BY_SIDE,
          sequence: { groupOrder: 0 },
        },
      },
      // The suites that stall, kill or fail over Redis, MongoDB and whole processes, and measure
      // what survives within a bound: one file at a time, after the others, so no other suite's
      // load blurs the bounds they hold the product to (Redis commands timed in 200 ms, failovers
      // within 5 s, no request over 1 s).
      {
        extends: true,
        test: { name: 'alone', include: [...ALONE, TOPOLOGY], maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
