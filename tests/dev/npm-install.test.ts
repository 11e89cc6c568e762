import { execFile } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * `npm install` as a new user runs it: with the npm and the Node of their shell, which may be
 * older than the Node 22+ the packages need (npm scripts run on the Node 24 the root's `node`
 * devDependency installs). npm's engine check then judges the shell's Node; .npmrc keeps its
 * verdict, a page of EBADENGINE lines, off the screen.
 */

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The first `name` on PATH outside any node_modules/.bin: the shell's own, not the project's. */
function shellBinary(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && !dir.includes('node_modules') && existsSync(join(dir, name))) return realpathSync(join(dir, name));
  }
  return null;
}

async function shellNodeMajor(node: string): Promise<number> {
  const { stdout } = await run(node, ['--version']);
  return Number(/^v(\d+)\./.exec(stdout)?.[1]);
}

/** The environment of a shell: none of the npm_* variables `npm test` adds, no node_modules/.bin on PATH. */
function shellEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  env.PATH = (process.env.PATH ?? '')
    .split(':')
    .filter((dir) => !dir.includes('node_modules'))
    .join(':');
  return env;
}

const node = shellBinary('node');
const npm = shellBinary('npm');
const major = node ? await shellNodeMajor(node) : Number.NaN;
const old = node !== null && npm !== null && major < 22;

describe('npm install with the shell’s npm', () => {
  it.skipIf(!old)(
    `on a shell Node older than 22 (here ${node ? `v${major}` : 'none'}${old ? '' : ': nothing to try, skipped'}) prints no engine warnings, and shows them on --loglevel=warn`,
    { timeout: 120_000 },
    async () => {
      // A dry run builds the tree from the lockfile and checks every package's engines, as an
      // install does, and changes nothing.
      const install = (...extra: string[]) =>
        run(node as string, [npm as string, 'install', '--dry-run', '--no-audit', '--no-fund', ...extra], {
          cwd: ROOT,
          env: shellEnv(),
          maxBuffer: 16 * 1024 * 1024,
        });
      const quiet = await install();
      const said = `${quiet.stdout}${quiet.stderr}`;
      expect(said).not.toContain('EBADENGINE');
      expect(said.split('\n').filter((line) => line.startsWith('npm warn'))).toEqual([]);
      // The check still runs: asked for warnings, npm lists the packages that need Node 22+.
      const loud = await install('--loglevel=warn');
      expect(loud.stderr.match(/^npm warn EBADENGINE Unsupported engine \{$/gm)?.length).toBeGreaterThan(10);
    },
  );
});
