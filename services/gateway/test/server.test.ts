import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MINIMUM_NODE } from '@animal-store/common/node-version.js';
import { olderNode } from '@animal-store/tests/support/runtime.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The gateway as deployed: dist/server.js started by node, read by an operator at a terminal. */
const SERVER = fileURLToPath(new URL('../dist/server.js', import.meta.url));

async function runToExit(
  env: Record<string, string>,
  node = process.execPath,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(node, [SERVER], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', ADMIN_PORT: '0', METRICS_PORT: '0', ...env },
    // A server that does not exit by itself is killed, so a failing test leaves no process behind.
    timeout: 15_000,
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const [code] = await once(child, 'exit');
  return { code, output };
}

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
    const { code, output } = await runToExit({ TRUST_PROXY: '0.0.0.0/0', PLANS_FILE: plans, API_KEYS_FILE: keys });
    expect(code).toBe(1);
    expect(output).toBe(
      'gateway: invalid configuration:\n' +
        `  - PLANS_FILE=${plans}: plans.free is given twice (lines 3 and 5): give each once\n` +
        `  - TRUST_PROXY entry "0.0.0.0/0" trusts every address: set TRUST_PROXY=true for that, or name your proxies' addresses\n` +
        `  - API_KEYS_FILE=${keys}: entry 0: sha256 must be 64 lowercase hex characters\n`,
    );
  });
});

describe('dist/server.js on a Node.js too old for it', () => {
  const old = olderNode();
  // Skipped only on a machine with no older Node at /usr/bin/node (this project's machines have 20).
  it.skipIf(old === null)('says which version it needs and how to get it, and exits 1', async () => {
    const { path, version } = old as NonNullable<typeof old>;
    const { code, output } = await runToExit({}, path);
    expect(code).toBe(1);
    // Before undici loads: on Node 20 it dies of a TypeError reading zlib's zstd otherwise.
    expect(output).toBe(
      `gateway: needs Node.js ${MINIMUM_NODE} or later (24 LTS recommended); this is Node.js ${version} (${path}).\n` +
        '  In a checkout, npm install puts Node 24 in node_modules/.bin: npm start uses it, or run\n' +
        '  node_modules/.bin/node services/gateway/dist/server.js\n' +
        '  Elsewhere, install Node.js 24 LTS (https://nodejs.org/en/download, or nvm install 24), or use the node:24 image.\n',
    );
  });
});
