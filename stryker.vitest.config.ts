import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { areas } from './stryker.config.mjs';
import base from './vitest.config.js';

// The vitest configuration `npm run mutate` runs: the repository's, with its `suites` project
// alone (stryker.config.mjs picks the test files).
//
// Stryker runs it inside a copy of the repository (.stryker-tmp/sandbox-*), but node_modules
// there is a link to the real one, whose workspace links lead back to the real services: a test
// that imports `@animal-store/gateway/…` or `@animal-store/tests/…` would load the sources
// Stryker never mutated. These aliases keep both names inside the copy the config file sits in.
const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

/**
 * Runs a mutant's test files in the order its area lists them, the most focused first: a run
 * stops at the first failing test, so a mutant the unit tests kill never waits for the slower
 * files (vitest would otherwise start with the slowest).
 */
class AreaOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const area = Object.hasOwn(areas, process.env.MUTATE_AREA ?? '')
      ? areas[process.env.MUTATE_AREA as keyof typeof areas]
      : undefined;
    if (!area) return super.sort(files);
    const rank = (spec: TestSpecification) => {
      const index = area.testFiles.indexOf(relative(here('.'), spec.moduleId));
      return index < 0 ? area.testFiles.length : index;
    };
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

const projects = (base.test?.projects ?? []) as TestProjectInlineConfiguration[];
const suites = projects.find((project) => project.test?.name === 'suites');
if (!suites?.test) throw new Error('vitest.config.ts has no `suites` project');

export default defineConfig({
  ...base,
  resolve: {
    alias: [
      { find: /^@animal-store\/gateway\/test\/(.*)\.js$/, replacement: here('./services/gateway/test/$1.ts') },
      { find: /^@animal-store\/gateway\/(.*)\.js$/, replacement: here('./services/gateway/src/$1.ts') },
      { find: /^@animal-store\/tests\/support\/(.*)\.js$/, replacement: here('./tests/support/$1.ts') },
    ],
  },
  test: {
    ...base.test,
    // Stryker reads results through its own reporter; the CI summary line would only repeat.
    reporters: ['dot'],
    sequence: { sequencer: AreaOrder },
    // A mutant that leaves a promise unsettled hangs its test until this timeout; Stryker's own is
    // for loops that never yield. 20 s, as in `npm test`: the history and webhook areas run gateway
    // tests of up to 5 s alone (120 requests through two replicas), and Stryker's initial run of
    // the history area timed one out at 10 s under a load average of 13.
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Every mutant is a fresh vitest run over the files that cover it. The suites share their
    // worker's modules as in `npm test` (isolate off in vitest.config.ts): the set pays for its
    // imports once, not a second a file. Stryker switches mutants at run time, not at import.
    projects: [suites],
  },
});
