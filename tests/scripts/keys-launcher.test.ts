import { execFile } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

/*
 * `npm run keys` as the repository's package.json defines it, run in a throw-away copy of the
 * layout: the launcher, the two projects' sources and a stand-in for TypeScript's compiler that
 * writes each project's build and records each time it runs. The CLI of the copy prints its
 * arguments. What is observed: how many times the compiler ran, and what the CLI printed.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Copies src/**.js to dist/ for each project and writes its .tsbuildinfo, as `tsc -b` would; logs its run. */
const FAKE_TSC = `#!/usr/bin/env node
const { appendFileSync, cpSync, mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
appendFileSync(join(__dirname, '../../../tsc-runs.log'), process.argv.slice(2).join(' ') + '\\n');
for (const project of ['services/common', 'services/gateway']) {
  cpSync(join(project, 'src'), join(project, 'dist'), { recursive: true });
  writeFileSync(join(project, 'dist/.tsbuildinfo'), '{}');
}
`;

function copyOfTheLayout(): { dir: string; keys: (...args: string[]) => Promise<Run>; tscRuns: () => number } {
  const dir = mkdtempSync(join(tmpdir(), 'keys-launcher-'));
  dirs.push(dir);
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  };
  const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  write(
    'package.json',
    JSON.stringify({
      name: 'copy',
      private: true,
      type: 'module',
      scripts: { build: scripts.build, keys: scripts.keys },
    }),
  );
  if (existsSync(join(ROOT, 'scripts/keys.mjs'))) {
    mkdirSync(join(dir, 'scripts'));
    copyFileSync(join(ROOT, 'scripts/keys.mjs'), join(dir, 'scripts/keys.mjs'));
  }
  write('tsconfig.base.json', '{}');
  for (const project of ['services/common', 'services/gateway']) write(`${project}/tsconfig.json`, '{}');
  write('services/common/src/text.js', "export const said = (args) => 'cli: ' + args.join(' ');\n");
  write(
    'services/gateway/src/cli/main.js',
    "import { said } from '../../../common/dist/text.js';\nconsole.log(said(process.argv.slice(2)));\n",
  );
  write('node_modules/typescript/package.json', '{ "name": "typescript", "type": "commonjs" }');
  write('node_modules/typescript/bin/tsc', FAKE_TSC);
  chmodSync(join(dir, 'node_modules/typescript/bin/tsc'), 0o755);
  mkdirSync(join(dir, 'node_modules/.bin'));
  symlinkSync('../typescript/bin/tsc', join(dir, 'node_modules/.bin/tsc'));
  writeFileSync(join(dir, 'tsc-runs.log'), '');
  const keys = (...args: string[]) =>
    new Promise<Run>((done) => {
      execFile('npm', ['run', '-s', 'keys', '--', ...args], { cwd: dir }, (error, stdout, stderr) =>
        done({ code: error ? Number(error.code) : 0, stdout, stderr: ownLines(stderr) }),
      );
    });
  const tscRuns = () => readFileSync(join(dir, 'tsc-runs.log'), 'utf8').split('\n').filter(Boolean).length;
  return { dir, keys, tscRuns };
}

interface Run {
  code: number;
  stdout: string;
  stderr: string[];
}

/** Lines npm itself may print on this machine (config warnings), which are not the launcher's. */
const ownLines = (text: string) => text.split('\n').filter((l) => l !== '' && !l.startsWith('npm warn'));

/** An edit of `path` after the build (which ended with its process, before this). */
function edit(dir: string, path: string): void {
  appendFileSync(join(dir, path), '\n');
}

describe('npm run keys', () => {
  it('builds on the first call, then runs the CLI without the compiler while nothing changed', async () => {
    const { keys, tscRuns } = copyOfTheLayout();
    const first = await keys('list', '--json');
    expect(first.code, first.stderr.join('\n')).toBe(0);
    expect(first.stdout).toBe('cli: list --json\n');
    expect(tscRuns()).toBe(1);

    for (const args of [['list'], ['show', 'key_1']]) {
      const again = await keys(...args);
      expect(again).toEqual({ code: 0, stdout: `cli: ${args.join(' ')}\n`, stderr: [] });
    }
    expect(tscRuns()).toBe(1);
    // The build's note is on stderr, so stdout stays the CLI's alone.
    expect(first.stderr).toEqual([expect.stringMatching(/^keys: services\/common changed since the last build/)]);
  });

  it('rebuilds when a source, a tsconfig or the set of files changed since the build, once each', async () => {
    const { dir, keys, tscRuns } = copyOfTheLayout();
    await keys('list');
    expect(tscRuns()).toBe(1);
    edit(dir, 'services/gateway/src/cli/main.js');
    const edited = await keys('list');
    expect(tscRuns()).toBe(2);
    await keys('list');
    expect(tscRuns()).toBe(2);
    expect(edited.stderr).toEqual([expect.stringMatching(/^keys: services\/gateway changed since the last build/)]);

    edit(dir, 'services/gateway/tsconfig.json');
    await keys('list');
    expect(tscRuns()).toBe(3);

    edit(dir, 'tsconfig.base.json');
    await keys('list');
    expect(tscRuns()).toBe(4);

    // A file added, then removed: its directory's time moves on each time.
    writeFileSync(join(dir, 'services/common/src/extra.js'), '');
    await keys('list');
    expect(tscRuns()).toBe(5);
    rmSync(join(dir, 'services/common/src/extra.js'));
    const after = await keys('list');
    expect(after.stdout).toBe('cli: list\n');
    expect(tscRuns()).toBe(6);
    await keys('list');
    expect(tscRuns()).toBe(6);
  });
});
