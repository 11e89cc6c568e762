// @ts-check
// `npm run mutate` (scripts/mutate.mjs): mutation testing of the API keys, their sync between
// replicas, the event bus and the gate, one area at a time, each against the test files that
// exercise it. Not part of `npm test`; incremental mode reruns only what changed since the last.
// See docs/architecture.md, "Mutation testing".
//
// The rate limits (services/gateway/src/limits/**, plans.ts) are out of the scope for now: the
// limiter is being rewritten, and its area comes back with the rewrite.

const SRC = 'services/gateway/src';
const TEST = 'services/gateway/test';

/**
 * Each area: the code it mutates and the in-process tests run against its mutants (app.inject or
 * the module itself, a real Redis). A test file belongs to an area when it exercises that code
 * directly; suites that spawn processes and the topology suites are left out everywhere.
 */
export const areas = {
  keys: {
    mutate: [
      `${SRC}/keys/**/*.ts`,
      // Its only tests need a MongoDB (MONGO_URL, a container runtime or mongod) and skip without one.
      ...(process.env.MONGO_URL ? [] : [`!${SRC}/keys/mongo-key-store.ts`]),
    ],
    testFiles: [
      `${TEST}/api-key.test.ts`,
      `${TEST}/key-resolver.test.ts`,
      `${TEST}/keys-file.test.ts`,
      `${TEST}/memory-key-store.test.ts`,
      `${TEST}/mongo-key-store.test.ts`,
      `${TEST}/key-lifecycle.test.ts`,
      `${TEST}/admin.test.ts`,
      `${TEST}/gate-hardening.test.ts`,
    ],
  },
  gate: {
    mutate: [`${SRC}/gate.ts`, `${SRC}/gate/**/*.ts`],
    testFiles: [
      `${TEST}/gate.test.ts`,
      `${TEST}/gate-hardening.test.ts`,
      `${TEST}/key-lifecycle.test.ts`,
      'tests/hostile/operations.test.ts',
    ],
  },
  sync: {
    mutate: [`${SRC}/key-sync.ts`, `${SRC}/events.ts`],
    testFiles: [`${TEST}/events.test.ts`, `${TEST}/replicas.test.ts`],
  },
};

/** The area scripts/mutate.mjs asks for; `stryker run` alone runs every area at once (slow). */
const name = process.env.MUTATE_AREA;
const all = Object.values(areas);
const area =
  name === undefined
    ? { mutate: all.flatMap((a) => a.mutate), testFiles: [...new Set(all.flatMap((a) => a.testFiles))] }
    : areas[/** @type {keyof typeof areas} */ (name)];
if (!area) throw new Error(`MUTATE_AREA=${name} is not one of ${Object.keys(areas).join(', ')}`);
const out = `reports/mutation/${name ?? 'all'}`;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: area.mutate,
  testFiles: area.testFiles,
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.vitest.config.ts', pool: 'forks' },
  coverageAnalysis: 'perTest',
  // Mutants in module-level constants run every test each: a fifth of the mutants, half the
  // time. They are listed as ignored in the report, not scored.
  ignoreStatic: true,
  concurrency: 2,
  incremental: true,
  incrementalFile: `${out}/stryker-incremental.json`,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: `${out}/index.html` },
  jsonReporter: { fileName: `${out}/mutation.json` },
  // The services' built output and the deployment files play no part in these tests.
  ignorePatterns: ['/services/*/dist', '/bench', '/deploy', '/docs'],
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
