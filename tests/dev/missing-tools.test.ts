import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');

let emptyBin: string;

beforeAll(async () => {
  emptyBin = await mkdtemp(join(tmpdir(), 'no-tools-bin-'));
});

afterAll(async () => {
  if (emptyBin) await rm(emptyBin, { recursive: true, force: true });
});

/** A child vitest run on a machine without the tool, simulated: PATH is an empty folder (node is started by its path). */
function runWithout(args: string[]): Promise<{ output: string; exitCode: number | null }> {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: emptyBin, NO_COLOR: '1', FORCE_COLOR: '0' };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [VITEST, 'run', ...args],
      { cwd: ROOT, env, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        resolve({ output: `${stdout}\n${stderr}`, exitCode: err ? ((err.code as number | undefined) ?? 1) : 0 });
      },
    );
  });
}

describe('npm test on a machine without the tools some suites need', () => {
  it.each([
    [
      'kubectl or kustomize (every manifest suite)',
      ['tests/deploy/manifests.test.ts', 'tests/deploy/monitoring.test.ts'],
      /kubectl|kustomize|Error/,
      'MissingPrerequisite: neither kubectl nor kustomize is on PATH: install one to render deploy/k8s ' +
        '(no Debian package has them: https://kubernetes.io/docs/tasks/tools/)',
    ],
    [
      'script (npm start in a terminal)',
      ['tests/dev/npm-start.test.ts', '-t', 'in a terminal'],
      /script|ENOENT|Error/,
      'MissingPrerequisite: script is not on PATH: install util-linux (apt-get install bsdutils on Debian)',
    ],
  ])(
    '%s: one line naming what is missing and how to get it, not one failure per test',
    async (_label, args, about, line) => {
      const { output, exitCode } = await runWithout(args);
      expect(exitCode).toBe(1);
      expect(output.split('\n').filter((l) => about.test(l) && !/^\s*(✓|↓|×|❯|FAIL)/.test(l))).toEqual([line]);
      expect(output).toMatch(/^\d+ passed, 1 failed, \d+ skipped$/m);
    },
    60_000,
  );
});
