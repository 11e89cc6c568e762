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

export default defineConfig({
  // Tests import the services by package name (`@animal-store/gateway/app.js`); this condition in
  // their `exports` maps those names to the TypeScript sources the tests have always run, where
  // plain Node (scripts/start.mjs, bench) gets the built `dist`. Vitest also starts its workers
  // with it (`--conditions`), so it is named for this project: no package in node_modules uses it.
  ssr: { resolve: { conditions: ['@animal-store/source'] } },
  test: {
    environment: 'node',
    pool: 'forks',
    testTimeout: 20_000,
    hookTimeout: 60_000,
    reporters: ['default', './tests/support/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'suites',
          include: ['services/*/test/**/*.test.ts', 'tests/**/*.test.ts'],
          exclude: [...configDefaults.exclude, TOPOLOGY, CONTAINERS],
        },
      },
      { extends: true, test: { name: `TZ=${FAR_ZONE}`, include: ZONED, env: { TZ: FAR_ZONE } } },
      // The Redis Cluster and Sentinel suites (a dozen Redis processes and gateways under load)
      // run after all others, alone: side by side they starve suites that time Redis commands
      // in 200 ms, and the others would blur the failover figures they measure.
      { extends: true, test: { name: 'topology', include: [TOPOLOGY], sequence: { groupOrder: 1 } } },
    ],
  },
});
