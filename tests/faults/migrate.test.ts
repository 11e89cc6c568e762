import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { SERVERS } from '../support/service-process.js';

/**
 * `server.js migrate` (what `npm run migrate`, the Kubernetes Job and the compose one-shot run)
 * where it cannot go on for a reason of its environment: exit 1 and the reason on stderr, no
 * stack. (Against a real MongoDB it runs in the MongoDB suites: services/gateway/test/migrations.test.ts.)
 */
async function migrate(service: keyof typeof SERVERS, env: Record<string, string>) {
  return promisify(execFile)(process.execPath, [SERVERS[service], 'migrate'], {
    env: { PATH: process.env.PATH ?? '', ...env },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

describe('server.js migrate refuses a bad environment in a few lines and exits 1', () => {
  it.each(['gateway', 'pets'] as const)('%s: without MONGO_URL', async (service) => {
    const result = await migrate(service, {});
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `${service} migrate: invalid configuration:\n` +
        '  - MONGO_URL is required to migrate: the MongoDB whose indexes and data it brings up to date\n',
    );
  });

  it('pets: a database name MongoDB refuses, the password never shown', async () => {
    const result = await migrate('pets', { MONGO_URL: 'mongodb://ops:hunter2@db.example/pets.v2' });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      'pets migrate: invalid configuration:\n' +
        '  - MONGO_URL names a database MongoDB refuses: use 1 to 63 characters without / \\ . " $ or spaces, or name none for "pets"\n',
    );
  });
});
