import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

/**
 * The commit-subject lint, run on a throw-away repository of its own: a subject of 72 characters
 * passes, 73 fails naming the commit, a body glued to its subject fails, and commits before the
 * base are not read.
 */

const SCRIPT = fileURLToPath(new URL('../../scripts/lint-commits.mjs', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function repository(): { dir: string; commit: (message: string) => string } {
  const dir = mkdtempSync(join(tmpdir(), 'lint-commits-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'scripts'));
  copyFileSync(SCRIPT, join(dir, 'scripts', 'lint-commits.mjs'));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
      cwd: dir,
      encoding: 'utf8',
    });
  git('init', '-q');
  return {
    dir,
    commit: (message) => {
      git('commit', '-q', '--allow-empty', '-m', message);
      return git('rev-parse', 'HEAD').trim();
    },
  };
}

const lint = (dir: string, base: string) =>
  spawnSync(process.execPath, ['scripts/lint-commits.mjs', base], { cwd: dir, encoding: 'utf8' });

describe('lint-commits', () => {
  it('passes a 72-character subject with a body after a blank line', () => {
    const { dir, commit } = repository();
    const base = commit('base');
    commit(`${'a'.repeat(72)}\n\nwhy it changed`);
    const run = lint(dir, base);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('fails a 73-character subject and names the commit', () => {
    const { dir, commit } = repository();
    const base = commit('base');
    const long = commit('b'.repeat(73));
    const run = lint(dir, base);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`${long.slice(0, 10)} subject is 73 characters (at most 72)`);
    expect(run.stderr).toContain('1 of 1 commits');
  });

  it('fails a body glued to its subject', () => {
    const { dir, commit } = repository();
    const base = commit('base');
    commit('short subject\nbody on the next line');
    const run = lint(dir, base);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('has no blank line after its subject');
  });

  it('reads only the commits after its base, and every commit when the base is missing', () => {
    const { dir, commit } = repository();
    commit('c'.repeat(200));
    const base = commit('base');
    commit('fine');
    expect(lint(dir, base).status).toBe(0);
    expect(lint(dir, 'HEAD~3').status).not.toBe(0);
  });
});
