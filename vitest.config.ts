import { configDefaults, defineConfig } from 'vitest/config';

const TOPOLOGY = 'tests/topology/**/*.test.ts';

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
          exclude: [...configDefaults.exclude, TOPOLOGY],
        },
      },
      // The Redis Cluster and Sentinel suites (a dozen Redis processes and gateways under load)
      // run after all others, alone: side by side they starve suites that time Redis commands
      // in 200 ms, and the others would blur the failover figures they measure.
      { extends: true, test: { name: 'topology', include: [TOPOLOGY], sequence: { groupOrder: 1 } } },
    ],
  },
});
