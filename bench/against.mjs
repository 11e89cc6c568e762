// `npm run bench -- --against REF`: the gateway of another commit (before a change, say) as one
// more subject, `gatewayAgainst`, interleaved in the same rounds as today's gateway. On this
// shared machine req/s swings ±20 % from run to run; two builds in one run's rounds see the same
// swings, so their ratio is what a before/after can rest on.
//
// The commit is checked out with `git worktree` in the run's temporary folder and built with this
// checkout's TypeScript. Its node_modules is this checkout's, entry by entry, except for the
// workspace packages (@animal-store/*), which are the commit's own: its gateway then runs its own
// common code too. Dependencies are today's: a commit whose package-lock.json differs is measured
// with today's packages, and the run says so.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';

const WORKSPACES = ['common', 'pets', 'gateway'];

/** Builds `ref` beside the run; returns the commit, its gateway's entry point and a note on its packages. */
export function buildAgainst(ref, dir) {
  const root = resolve('.');
  const commit = execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { encoding: 'utf8' }).trim();
  const tree = join(dir, 'against');
  execFileSync('git', ['worktree', 'add', '--detach', '--force', tree, commit], { stdio: 'ignore' });
  const modules = join(tree, 'node_modules');
  mkdirSync(join(modules, '@animal-store'), { recursive: true });
  for (const entry of readdirSync(join(root, 'node_modules'))) {
    if (entry !== '@animal-store') symlinkSync(join(root, 'node_modules', entry), join(modules, entry));
  }
  for (const name of WORKSPACES) symlinkSync(join(tree, 'services', name), join(modules, '@animal-store', name));
  process.stderr.write(`bench: building ${ref} (${commit.slice(0, 10)}) in ${tree}\n`);
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b'], {
    cwd: tree,
    stdio: 'inherit',
  });
  let lockChanged = false;
  try {
    execFileSync('git', ['diff', '--quiet', commit, '--', 'package-lock.json'], { stdio: 'ignore' });
  } catch {
    lockChanged = true;
  }
  return {
    ref,
    commit,
    server: join(tree, 'services/gateway/dist/server.js'),
    packages: lockChanged
      ? `today's node_modules (its package-lock.json differs from the working tree's)`
      : 'the same package-lock.json',
  };
}
