// @ts-check
// `npm run mutate`: mutation testing of the rate limits, the API keys, their sync between
// replicas and the gate, against the test files that exercise them. Not part of `npm test`:
// a full run takes tens of minutes; incremental mode reruns only what changed since the last.

/** The code under mutation; see docs/architecture.md, "Mutation testing". */
const mutate = [
  'services/gateway/src/limits/**/*.ts',
  'services/gateway/src/keys/**/*.ts',
  'services/gateway/src/key-sync.ts',
  'services/gateway/src/gate.ts',
  'services/gateway/src/gate/**/*.ts',
  'services/gateway/src/events.ts',
  // Its only tests need a MongoDB (MONGO_URL, a container runtime or mongod) and skip without one.
  ...(process.env.MONGO_URL ? [] : ['!services/gateway/src/keys/mongo-key-store.ts']),
];

/**
 * In-process gateway tests (app.inject, a real Redis). Left out: the suites that spawn services
 * (cli, tests/faults, tests/integration, tests/dev), the topology suites, and those aimed at other
 * code (OpenAPI, CORS, proxying, configuration).
 */
const testFiles = [
  'services/gateway/test/address-key.test.ts',
  'services/gateway/test/admin.test.ts',
  'services/gateway/test/api-key.test.ts',
  'services/gateway/test/gate-hardening.test.ts',
  'services/gateway/test/file-key-store.test.ts',
  'services/gateway/test/gate.test.ts',
  'services/gateway/test/key-lifecycle.test.ts',
  'services/gateway/test/key-resolver.test.ts',
  'services/gateway/test/keys-file.test.ts',
  'services/gateway/test/memory-key-store.test.ts',
  'services/gateway/test/memory-limiter.test.ts',
  'services/gateway/test/mongo-key-store.test.ts',
  'services/gateway/test/overload.test.ts',
  'services/gateway/test/redis-limiter.test.ts',
  'services/gateway/test/replicas.test.ts',
  'tests/hostile/operations.test.ts',
];

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate,
  testFiles,
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.vitest.config.ts', pool: 'forks' },
  coverageAnalysis: 'perTest',
  // Mutants in module-level constants run every test each: a fifth of the mutants, half the
  // time. They are listed as ignored in the report, not scored.
  ignoreStatic: true,
  concurrency: 2,
  incremental: true,
  incrementalFile: 'reports/mutation/stryker-incremental.json',
  reporters: ['clear-text', 'progress', 'html'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  // The services' built output and the deployment files play no part in these tests.
  ignorePatterns: ['/services/*/dist', '/bench', '/deploy', '/docs'],
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
