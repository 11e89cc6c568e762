import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { portalPages } from '../../src/portal/pages.js';

// The portal's files as its listener serves them, from a copy of services/gateway/portal the test
// edits: read on every request in development, once at start in production; every file under the
// page's policy, which admits its import map by hash and nothing else inline. tests/portal.test.ts
// drives the pages.

const PORTAL = fileURLToPath(new URL('../../portal/', import.meta.url));

let dir: string;
let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function serve(readEachRequest: boolean): Promise<FastifyInstance> {
  dir = await mkdtemp(join(tmpdir(), 'portal-'));
  await cp(PORTAL, dir, { recursive: true });
  app = Fastify();
  await app.register(portalPages, { readEachRequest, dir });
  await app.ready();
  return app;
}

const get = async (url: string) => {
  const res = await (app as FastifyInstance).inject({ url });
  return { status: res.statusCode, body: res.body, csp: res.headers['content-security-policy'] };
};

async function editImportMap(): Promise<void> {
  const html = await readFile(join(dir, 'index.html'), 'utf8');
  await writeFile(join(dir, 'index.html'), html.replace('"imports":{', '"imports":{"edited":"/portal/edited.js",'));
}

describe('the portal’s pages', () => {
  it('serves its page, its own files, the shared ones and preact under one policy: self and the import map', async () => {
    await serve(false);
    const page = await get('/portal');
    expect(page.status).toBe(200);
    expect(page.csp).toMatch(
      /^default-src 'none'; script-src 'self' 'sha256-[A-Za-z0-9+/=]+'; style-src 'self'; img-src 'self';/,
    );
    for (const url of [
      '/portal/portal.js',
      '/portal/shared/components.js',
      '/portal/shared/base.css',
      '/portal/vendor/preact.js',
    ]) {
      expect(await get(url), url).toMatchObject({ status: 200, csp: page.csp });
    }
    expect((await get('/portal/extra.js')).status).toBe(404);
  });

  it('in development, serves the files and the policy as they are now', async () => {
    await serve(true);
    const before = await get('/portal');
    await writeFile(join(dir, 'keys.js'), '// edited\n');
    await editImportMap();
    expect((await get('/portal/keys.js')).body).toBe('// edited\n');
    const after = await get('/portal');
    expect(after.csp).not.toBe(before.csp);
    expect((await get('/portal/usage.js')).csp).toBe(after.csp);
  });

  it('in production, serves them as they were at start, and does not start without one', async () => {
    await serve(false);
    const file = await get('/portal/keys.js');
    const page = await get('/portal');
    await writeFile(join(dir, 'keys.js'), '// edited\n');
    await editImportMap();
    expect(await get('/portal/keys.js')).toEqual(file);
    expect(await get('/portal')).toEqual(page);
    await app?.close();
    await rm(join(dir, 'history.js'));
    app = Fastify();
    await expect(app.register(portalPages, { readEachRequest: false, dir }).ready()).rejects.toThrow(/history\.js/);
  });
});
