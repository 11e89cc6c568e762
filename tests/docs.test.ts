import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createRegistry } from '@animal-store/common/metrics.js';
import { startGateway, type TestGateway } from '@animal-store/gateway/test/support/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { which } from './support/runtime.js';

/**
 * The public API reference across both services on real sockets: the gateway publishes the pets
 * service's document at /v1/openapi.json and renders it at /docs, which headless Chromium loads
 * with nothing but localhost to talk to.
 */

const run = promisify(execFile);

type Pets = ReturnType<typeof buildPets>;
type Operation = { operationId: string; responses: Record<string, { headers?: Record<string, unknown> }> };
type Doc = {
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown> };
};

let pets: Pets;
let gateway: TestGateway;

beforeAll(async () => {
  pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: createRegistry('pets', false) });
  await pets.listen({ host: '127.0.0.1', port: 0 });
  const petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  gateway = await startGateway({ upstream: petsUrl });
  await gateway.listen();
});

afterAll(async () => {
  await gateway?.close();
  await pets?.close();
});

function chromiumPath(): string {
  const found = which('chromium') ?? (existsSync('/usr/bin/chromium') ? '/usr/bin/chromium' : null);
  if (!found) {
    throw new Error(
      'chromium is not installed (looked on PATH and at /usr/bin/chromium): this test renders /docs in headless ' +
        "Chromium. .ci/run installs it (Debian's chromium package: apt-get install chromium).",
    );
  }
  return found;
}

/** Loads a page in headless Chromium with a throwaway profile and returns the DOM once scripts have run. */
async function dumpDom(url: string): Promise<string> {
  const binary = chromiumPath();
  const profile = await mkdtemp(join(tmpdir(), 'docs-chromium-'));
  try {
    const { stdout } = await run(
      binary,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--user-data-dir=${profile}`,
        '--virtual-time-budget=10000',
        '--dump-dom',
        url,
      ],
      { timeout: 60_000, maxBuffer: 32 * 1024 * 1024 },
    );
    return stdout;
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}

describe('the public API reference', () => {
  it('publishes the pets operations with the bearer scheme, 401/429 and rate-limit headers, without a key', async () => {
    const res = await fetch(`${gateway.url}/v1/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const doc = (await res.json()) as Doc;
    const all = Object.values(doc.paths).flatMap((item) => Object.values(item));
    // GET /v1, the index, needs no key: the gateway's refusals and limit headers are not its own.
    expect(doc.paths['/']?.get).toMatchObject({ operationId: 'apiIndex', security: [] });
    // GET /v1/usage takes nothing from the key's windows: no limit headers either (openapi.test.ts).
    const operations = all.filter((op) => op.operationId !== 'apiIndex' && op.operationId !== 'getUsage');
    expect(operations.map((op) => op.operationId).sort()).toEqual(['createPet', 'getPet', 'listPets']);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const op of operations) {
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['401', '429']));
      for (const [status, response] of Object.entries(op.responses)) {
        expect(response.headers?.['X-RateLimit-Remaining'], `${op.operationId} ${status}`).toBeDefined();
      }
    }
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
  });

  it('renders the index, the three pets operations, the usage, the document link and the ban rule at /docs in headless Chromium, from local assets only', {
    timeout: 90_000,
  }, async () => {
    const dom = await dumpDom(`${gateway.url}/docs`);
    // swagger-ui renders one block per operation: method, path (data-path) and, as configured, its operationId.
    const blocks = [
      ...dom.matchAll(
        /class="opblock opblock-[^"]*" id="operations-[\w-]+-(\w+)"[\s\S]*?class="opblock-summary-method">(\w+)<[\s\S]*?data-path="([^"]+)"[\s\S]*?class="opblock-summary-operation-id">(\w+)</g,
      ),
    ].map((m) => ({ id: m[1], method: m[2], path: m[3], operationId: m[4] }));
    const text = dom.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ');
    expect(blocks, `page text: ${text.slice(0, 2_000)}`).toEqual([
      { id: 'apiIndex', method: 'GET', path: '/', operationId: 'apiIndex' },
      { id: 'listPets', method: 'GET', path: '/pets', operationId: 'listPets' },
      { id: 'createPet', method: 'POST', path: '/pets', operationId: 'createPet' },
      { id: 'getPet', method: 'GET', path: '/pets/{petId}', operationId: 'getPet' },
      { id: 'getUsage', method: 'GET', path: '/usage', operationId: 'getUsage' },
    ]);
    expect(dom).toContain('Animal store API');
    // Paths are relative to the base address the page names (the gateway's own /v1 by default).
    expect(dom).toMatch(/<option value="\/v1">/);
    // A link to the document itself, the deprecated operation's successor in its summary, and the
    // ban rule with the numbers in force (the defaults here).
    expect(dom).toMatch(/<a [^>]*href="\/v1\/openapi\.json"/);
    expect(text).toContain(
      'Get an animal (deprecated, removed 5 December 2030: use GET /pets with its status or id filter)',
    );
    expect(text).toContain(
      'A refused request counts toward a ban until its Retry-After has passed (for at most 1 minute): more than ' +
        '50 counting at once ban the key for 15 minutes',
    );
    // Everything the rendered page points at is on this gateway (or inline data), but for the
    // license: swagger-ui links an SPDX identifier to its page at spdx.org, a link, never a load.
    const origin = new URL(gateway.url).origin;
    for (const [, url] of dom.matchAll(/(?:src|href)="([^"#][^"]*)"/g)) {
      if (!url || url.startsWith('data:') || url === 'https://spdx.org/licenses/LicenseRef-Proprietary.html') continue;
      expect(new URL(url, gateway.url).origin, url).toBe(origin);
    }
  });
});
