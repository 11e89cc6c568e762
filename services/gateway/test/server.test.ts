import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeTooOld } from '@animal-store/common/node-version.js';
import { olderNode } from '@animal-store/tests/support/runtime.js';
import { type LogLine, runToExit } from '@animal-store/tests/support/service-process.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The gateway as deployed (dist/server.js), its output read by an operator at a terminal. */
const PORTS = { PORT: '0', ADMIN_PORT: '0', PORTAL_PORT: '0' };
const output = (logs: LogLine[]) => `${logs.map((l) => l.raw).join('\n')}\n`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gateway-server-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('dist/server.js with a bad configuration', () => {
  it('lists every problem of the environment and its files in one report and exits 1, no stack trace', async () => {
    const plans = join(dir, 'plans.json');
    // A plan given twice: JSON.parse would keep the second and drop the first without a word.
    await writeFile(
      plans,
      '{\n  "plans": {\n    "free": { "windows": { "minute": 60 } },\n    "pro": { "windows": { "minute": 300 } },\n' +
        '    "free": { "windows": { "minute": 6000 } }\n  }\n}\n',
    );
    const keys = join(dir, 'keys.json');
    await writeFile(keys, JSON.stringify([{ id: 'key_a', plan: 'free', sha256: 'not-a-hash' }]));
    const result = await runToExit(
      'gateway',
      { ...PORTS, TRUST_PROXY: '0.0.0.0/0', PLANS_FILE: plans, API_KEYS_FILE: keys },
      15_000,
    );
    expect(result.code).toBe(1);
    expect(output(result.logs)).toBe(
      'gateway: invalid configuration:\n' +
        `  - PLANS_FILE=${plans}: plans.free is given twice (lines 3 and 5): give each once\n` +
        `  - API_KEYS_FILE=${keys}: entry 0: sha256 must be 64 lowercase hex characters\n` +
        `  - TRUST_PROXY entry "0.0.0.0/0" trusts every address: set TRUST_PROXY=true for that, or name your proxies' addresses\n`,
    );
  });
});

describe('dist/server.js on a Node.js too old for it', () => {
  const old = olderNode();
  // Skipped only on a machine with no older Node at /usr/bin/node (this project's machines have 20).
  it.skipIf(old === null)('says which version it needs and how to get it, and exits 1', async () => {
    const { path, version } = old as NonNullable<typeof old>;
    const result = await runToExit('gateway', PORTS, 15_000, path);
    expect(result.code).toBe(1);
    // Before undici loads: on Node 20 it dies of a TypeError reading zlib's zstd otherwise.
    expect(output(result.logs)).toBe(nodeTooOld('gateway', version, path));
  });
});
