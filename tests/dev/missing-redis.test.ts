import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');

/**
 * A machine without redis-server, simulated: a child vitest run whose PATH is an empty folder
 * (node is started by its path) and without REDIS_URL, on a suite that needs its own redis-server.
 */
describe('npm test on a machine without redis-server', () => {
  let emptyBin: string;
  let output: string;
  let exitCode: number | null;

  beforeAll(async () => {
    emptyBin = await mkdtemp(join(tmpdir(), 'no-redis-bin-'));
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: emptyBin, NO_COLOR: '1', FORCE_COLOR: '0' };
    delete env.REDIS_URL;
    delete env.DOCKER_HOST;
    ({ output, exitCode } = await new Promise<{ output: string; exitCode: number | null }>((resolve) => {
      execFile(
        process.execPath,
        [VITEST, 'run', 'services/gateway/test/replicas/key-sync.test.ts'],
        { cwd: ROOT, env, maxBuffer: 16 * 1024 * 1024 },
        (err, stdout, stderr) => {
          resolve({ output: `${stdout}\n${stderr}`, exitCode: err ? ((err.code as number | undefined) ?? 1) : 0 });
        },
      );
    }));
  });

  afterAll(async () => {
    if (emptyBin) await rm(emptyBin, { recursive: true, force: true });
  });

  it('fails the suite with one line naming what is missing and how to get it, and nothing else', () => {
    expect(exitCode).toBe(1);
    const mentions = output.split('\n').filter((line) => /redis-server|Error|TypeError/.test(line));
    expect(mentions).toEqual([
      'MissingPrerequisite: redis-server is not on PATH: install it (apt-get install redis-server; .ci/run does)',
    ]);
    expect(output).not.toContain('Cannot read properties');
  });

  it('counts the suite file that failed outside a test in the summary line', () => {
    expect(output).toMatch(/^0 passed, 1 failed, \d+ skipped$/m);
  });
});
