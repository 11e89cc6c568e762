import { configDefaults, defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * `npm run test:quick`, the edit loop: the unit and route suites of services/, in one project and
 * one zone. Left to `npm test`: the CLI suites (each command a child process on the build) and
 * replica suites (several gateways on one Redis), and the far-zone run.
 */
export default mergeConfig(
  { ...base, test: { ...base.test, projects: undefined } },
  defineConfig({
    test: {
      name: 'quick',
      include: ['services/*/test/**/*.test.ts'],
      exclude: [...configDefaults.exclude, 'services/gateway/test/cli/**', 'services/gateway/test/replicas/**'],
      maxWorkers: 3,
    },
  }),
);
