import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { type AdminCall, adminCaller } from './admin.js';
import { ADMIN_TOKEN, type GatewayOptions, startGateway, type TestGateway } from './helpers.js';

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

/** The CLI tests' gateway (useCliGateway): the CLI run against it, its admin API in process. */
export interface CliGateway {
  /** Runs the built CLI against the gateway's admin listener. */
  run(args: string[]): Promise<Run>;
  /** Calls the gateway's admin API in process, as the operator. */
  admin: AdminCall;
}

/**
 * A gateway for the whole test file, in the embedded mode unless `options` say otherwise, its
 * admin listener open for the CLI: started before the file's tests, closed after them.
 */
export function useCliGateway(options: GatewayOptions = {}): CliGateway {
  let gw: TestGateway | undefined;
  let env: Record<string, string> | undefined;
  beforeAll(async () => {
    gw = await startGateway({ redisUrl: null, ...options });
    env = await adminEnv(gw);
  });
  afterAll(async () => {
    await gw?.close();
  });
  const current = () => {
    if (!gw || !env) throw new Error('useCliGateway: the gateway starts in beforeAll');
    return { gw, env };
  };
  return {
    run: (args) => runCli(args, current().env),
    admin: (...call) => adminCaller(current().gw)(...call),
  };
}
