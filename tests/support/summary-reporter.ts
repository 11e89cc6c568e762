import type { Reporter, TestModule, TestRunEndReason } from 'vitest/node';

interface Summary {
  passed: number;
  failed: number;
  skipped: number;
}

/**
 * The counts CI reads. A test file that fails outside any test (a beforeAll that throws, an
 * import that fails) counts as one failure, and so does each unhandled error: whenever vitest
 * fails the run, `failed` is above 0.
 */
function summarize(
  modules: ReadonlyArray<TestModule>,
  unhandledErrors: ReadonlyArray<unknown> = [],
  reason: TestRunEndReason = 'passed',
): Summary {
  const summary: Summary = { passed: 0, failed: 0, skipped: 0 };
  for (const mod of modules) {
    let failedTests = 0;
    for (const test of mod.children.allTests()) {
      const state = test.result().state;
      if (state === 'passed') summary.passed++;
      else if (state === 'failed') failedTests++;
      else summary.skipped++;
    }
    summary.failed += failedTests;
    if (mod.state() === 'failed' && failedTests === 0) summary.failed++;
  }
  summary.failed += unhandledErrors.length;
  // Whatever else makes vitest fail the run (say, a timeout it reports only as the reason).
  if (reason === 'failed' && summary.failed === 0) summary.failed = 1;
  return summary;
}

/**
 * Ends every run with the one plain line CI reads: "N passed, N failed, N skipped".
 * @public vitest.config.ts names this file as a reporter; nothing imports it.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(
    modules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<unknown>,
    reason: TestRunEndReason,
  ): void {
    const { passed, failed, skipped } = summarize(modules, unhandledErrors, reason);
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
