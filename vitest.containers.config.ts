import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { useLocalEngine } from './tests/support/containers.js';

/**
 * The container tier (npm run test:containers): the images built from this repository and run
 * as containers, the integration flows in the stack's containers mode, the compose file. Never
 * part of plain `npm test`. With no DOCKER_HOST, it uses the podman socket of
 * `npm run containers:setup` (tests/support/containers.ts).
 */
const repoRoot = fileURLToPath(new URL('.', import.meta.url));
useLocalEngine(repoRoot);
process.env.TEST_CONTAINERS = '1';

export default defineConfig({
  ssr: { resolve: { conditions: ['@animal-store/source'] } },
  test: {
    environment: 'node',
    pool: 'forks',
    // One suite at a time: each starts several containers, and two cores are shared.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 600_000,
    globalSetup: ['./tests/support/containers-global-setup.ts'],
    include: ['tests/containers/**/*.test.ts', 'tests/integration/flows.test.ts'],
    reporters: ['default', './tests/support/summary-reporter.ts'],
  },
});
