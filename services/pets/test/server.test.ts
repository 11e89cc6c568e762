import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { nodeTooOld } from '@animal-store/common/node-version.js';
import { freePort, olderNode } from '@animal-store/tests/support/runtime.js';
import { runToExit as runService } from '@animal-store/tests/support/service-process.js';
import { describe, expect, it } from 'vitest';
import { newApp } from './helpers.js';

const SERVER = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe('on a real socket', () => {
  it('serves create, get and list over HTTP', async () => {
    const app = newApp();
    try {
      const address = await app.listen({ host: '127.0.0.1', port: 0 });
      const created = await fetch(`${address}/v1/pets`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Rex', categoryId: 4, status: 'sold' }),
      });
      expect(created.status).toBe(201);
      const pet = (await created.json()) as { id: number };
      expect(created.headers.get('location')).toBe(`/v1/pets?id=${pet.id}`);

      const fetched = await fetch(`${address}/v1/pets/${pet.id}`);
      expect(fetched.status).toBe(200);
      expect(fetched.headers.get('sunset')).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
      expect(await fetched.json()).toEqual(pet);

      const listed = await fetch(`${address}/v1/pets?status=sold`);
      expect(await listed.json()).toEqual([pet]);
    } finally {
      await app.close();
    }
  });
});

/** Starts dist/server.js and resolves with its address once it logs that it listens. */
async function startServer(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; logs: string[] }> {
  const child = spawn(process.execPath, [SERVER], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        logs.push(line);
        const match = /Server listening at (http:\/\/[^"]+)/.exec(line);
        if (match?.[1]) resolve(match[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${logs.join('\n')}`)));
  });
  return { child, url, logs };
}

async function runToExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [SERVER], { env: { PATH: process.env.PATH ?? '', METRICS_PORT: '0', ...env } });
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

describe('dist/server.js', () => {
  it('is built (npm test builds first)', () => {
    expect(existsSync(SERVER), `${SERVER} is missing: run npm run build`).toBe(true);
  });

  it('starts with the in-memory store, says so loudly, serves, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const { child, url, logs } = await startServer({ PORT: String(port) });
    try {
      expect(url).toBe(`http://127.0.0.1:${port}`);
      expect(logs.some((line) => line.includes('"level":40') && line.includes('PET STORE: in-memory'))).toBe(true);
      const created = await fetch(`${url}/v1/pets`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Rex', categoryId: 1 }),
      });
      expect(created.status).toBe(201);
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
    } finally {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = await exited;
      expect(code).toBe(0);
    }
  });

  it('refuses to start in production without MONGO_URL, saying why', async () => {
    const { code, output } = await runToExit({ NODE_ENV: 'production', PORT: '0', LOG_LEVEL: 'loud' });
    expect(code).toBe(1);
    // The gateway's format: text for the operator, every problem, not a JSON log record.
    expect(output).toBe(
      'pets: invalid configuration:\n' +
        '  - MONGO_URL is required when NODE_ENV=production (the in-memory store loses every pet on restart)\n' +
        '  - LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"\n',
    );
  });

  it('exits 1 when MongoDB cannot be reached at start, without logging the password', async () => {
    const port = await freePort();
    const { code, output } = await runToExit({
      MONGO_URL: `mongodb://user:hunter2@127.0.0.1:${port}/?directConnection=true`,
      PORT: '0',
    });
    expect(code).toBe(1);
    expect(output).toContain('PET STORE: MongoDB');
    // One line naming MONGO_URL and what to do, its password hidden (tests/faults/start-up.test.ts).
    expect(output).toContain(`pets: MONGO_URL=mongodb://user:***@127.0.0.1:${port}/: MongoDB cannot be reached`);
    expect(output).not.toContain('hunter2');
  });
});

describe('dist/server.js on a Node.js too old for it', () => {
  const old = olderNode();
  // Skipped only on a machine with no older Node at /usr/bin/node (this project's machines have 20).
  it.skipIf(old === null)('says which version it needs and how to get it, and exits 1', async () => {
    const { path, version } = old as NonNullable<typeof old>;
    const result = await runService('pets', { PORT: '0' }, 15_000, path);
    expect(result.code).toBe(1);
    expect(`${result.logs.map((l) => l.raw).join('\n')}\n`).toBe(nodeTooOld('pets', version, path));
  });
});
