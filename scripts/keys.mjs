// `npm run keys -- …`: the keys CLI from the build, rebuilt first only when a source of it changed.
// `tsc -b` finds an up-to-date build up to date too, but loading the compiler to learn so costs
// more than the command itself; a walk of the sources' modification times costs milliseconds.
// A stale build is rebuilt with the same `tsc -b`, its output on stderr: stdout stays the CLI's
// (`--json` lines for a script).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
/** The CLI's projects: the gateway and what it references. */
const PROJECTS = ['services/common', 'services/gateway'];
const CLI = join(root, 'services/gateway/dist/cli/main.js');

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/**
 * The newest modification time under `dir`, directories included: a file added, removed or
 * renamed changes its directory's time, so a build missing a new file or holding a deleted one
 * is stale as well.
 */
function newest(dir) {
  let latest = mtime(dir) ?? 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : (mtime(path) ?? 0));
  }
  return latest;
}

/** The first project whose build is older than one of its inputs (or missing), else undefined. */
function staleProject() {
  const base = mtime(join(root, 'tsconfig.base.json')) ?? 0;
  for (const project of PROJECTS) {
    const built = mtime(join(root, project, 'dist/.tsbuildinfo'));
    if (built === undefined) return project;
    const inputs = Math.max(base, mtime(join(root, project, 'tsconfig.json')) ?? 0, newest(join(root, project, 'src')));
    // A tie counts as changed: a timestamp's granularity may hide an edit made just after the build.
    if (inputs >= built) return project;
  }
  return mtime(CLI) === undefined ? 'services/gateway' : undefined;
}

const stale = staleProject();
if (stale) {
  process.stderr.write(`keys: ${stale} changed since the last build; building it (tsc -b services/gateway)\n`);
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  const build = spawnSync(process.execPath, [tsc, '-b', 'services/gateway'], {
    cwd: root,
    stdio: ['ignore', 2, 2],
  });
  if (build.status !== 0) {
    process.stderr.write('keys: the build failed (above); fix it, or see npm run build\n');
    process.exit(1);
  }
}
await import(pathToFileURL(CLI).href);
