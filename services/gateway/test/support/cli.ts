import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADMIN_TOKEN, type TestGateway } from './helpers.js';

/** The built keys CLI (`npm run build` first), as `npm run keys` runs it. */
export const CLI = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../dist/cli/main.js');

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI with exactly the given environment on top of PATH (no ADMIN_* leaks in from outside). */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 15_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

/** Opens a test gateway's admin listener on loopback: the environment the CLI needs to reach it. */
export async function adminEnv(gw: TestGateway): Promise<Record<string, string>> {
  await gw.admin.listen({ host: '127.0.0.1', port: 0 });
  return { ADMIN_URL: `127.0.0.1:${(gw.admin.server.address() as AddressInfo).port}`, ADMIN_TOKEN };
}
