import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';

/**
 * The build context of a service image's `prebuilt` target (services/*\/Dockerfile): what the
 * Dockerfile's build and deps stages would make, made on the host instead. The dist folders are
 * the ones `npm run build` just compiled (test:containers builds before it runs); node_modules is
 * the deps stage's own command, `npm ci --omit=dev` on the same lockfile, which finds every
 * package in npm's cache, warm from the host's `npm ci`. A cold image build from source runs a
 * full `npm ci` and tsc inside each image: about 200 s apiece on a loaded two-core machine, where
 * this takes seconds (docs/containers.md).
 */

export type ServiceName = 'pets' | 'gateway';

const run = promisify(execFile);

/** Besides the dist folders: what the default target copies from the repository as it is. */
const SOURCE_FILES: Record<ServiceName, string[]> = {
  pets: [],
  // The admin console's and the portal's pages, scripts and styles, served as files.
  gateway: ['services/gateway/console', 'services/gateway/portal', 'services/gateway/ui-shared'],
};

/** What .dockerignore keeps out of the default target's context, kept out here too. */
function wanted(path: string): boolean {
  const name = basename(path);
  return name !== 'node_modules' && !name.endsWith('.tsbuildinfo') && name !== '.env' && !name.startsWith('.env.');
}

/**
 * Makes the context in a new temporary folder: the service's Dockerfile at its root, the app
 * files under app/ (the prebuilt stage copies that folder to /app). The caller removes it.
 */
export async function stagePrebuiltContext(repoRoot: string, name: ServiceName): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `animal-store-${name}-image-`));
  try {
    const app = join(dir, 'app');
    const workspaces = ['services/common', `services/${name}`];
    await copyFile(join(repoRoot, `services/${name}/Dockerfile`), join(dir, 'Dockerfile'));
    for (const workspace of workspaces) await mkdir(join(app, workspace), { recursive: true });
    for (const file of ['package.json', 'package-lock.json', ...workspaces.map((w) => `${w}/package.json`)]) {
      await copyFile(join(repoRoot, file), join(app, file));
    }
    const workspaceArgs = workspaces.flatMap((w) => ['-w', w]);
    await run(
      'npm',
      ['ci', '--omit=dev', ...workspaceArgs, '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline'],
      { cwd: app, maxBuffer: 16 * 1024 * 1024 },
    );
    for (const path of [...workspaces.map((w) => `${w}/dist`), ...SOURCE_FILES[name]]) {
      await cp(join(repoRoot, path), join(app, path), { recursive: true, filter: wanted });
    }
    return dir;
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}
