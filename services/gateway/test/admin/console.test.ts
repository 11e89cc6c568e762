import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { consoleRoutes } from '../../src/admin/console.js';

// The console's files as the admin listener serves them: read on every request in development,
// so an edit shows on the next reload, and once at start in production. Each app here serves a
// copy of services/gateway/console that the test edits; tests/console.test.ts drives the pages.

const CONSOLE = fileURLToPath(new URL('../../console/', import.meta.url));

let dir: string;
let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function serve(readEachRequest: boolean): Promise<FastifyInstance> {
  dir = await mkdtemp(join(tmpdir(), 'console-'));
  await cp(CONSOLE, dir, { recursive: true });
  app = Fastify();
  await app.register(consoleRoutes, { readEachRequest, dir });
  await app.ready();
  return app;
}

const get = async (url: string) => {
  const res = await (app as FastifyInstance).inject({ url });
  return { status: res.statusCode, body: res.body, csp: res.headers['content-security-policy'] };
};

/** The page with its import map changed: a new inline script, so a new hash in the CSP. */
async function editPage(): Promise<void> {
  const html = await readFile(join(dir, 'index.html'), 'utf8');
  await writeFile(join(dir, 'index.html'), html.replace('"imports":{', '"imports":{"edited":"/console/edited.js",'));
}

describe('the console in development (read on every request)', () => {
  it('serves a file as it is now: an edit shows on the next request', async () => {
    await serve(true);
    const before = await get('/console/figures.js');
    expect(before.status).toBe(200);
    await writeFile(join(dir, 'figures.js'), '// edited\n');
    expect(await get('/console/figures.js')).toMatchObject({ status: 200, body: '// edited\n' });
  });

  it('serves the page as it is now, with the policy for its import map as it is now', async () => {
    await serve(true);
    const before = await get('/console');
    await editPage();
    const after = await get('/console');
    expect(after.body).toContain('/console/edited.js');
    expect(after.csp).not.toBe(before.csp);
    // Every file carries the page's policy.
    expect((await get('/console/app.js')).csp).toBe(after.csp);
  });

  it('still serves only the console’s own files and the generated and library ones', async () => {
    await serve(true);
    await writeFile(join(dir, 'extra.js'), '// not one of the console’s files\n');
    expect((await get('/console/extra.js')).status).toBe(404);
    expect((await get('/console/key-rules.js')).body).toContain('export const WINDOWS = ');
    expect((await get('/console/vendor/preact.js')).status).toBe(200);
  });

  it('serves the leaks page, which the app routes #/leaks to', async () => {
    await serve(true);
    expect((await get('/console/leaks.js')).body).toContain("api('GET', '/admin/leaks?limit=100')");
    expect((await get('/console/app.js')).body).toContain('href="#/leaks"');
  });
});

describe('the console in production (read once, at start)', () => {
  it('serves its files and page as they were at start, whatever changes on disk', async () => {
    await serve(false);
    const file = await get('/console/figures.js');
    const page = await get('/console');
    await writeFile(join(dir, 'figures.js'), '// edited\n');
    await editPage();
    await rm(join(dir, 'style.css'));
    expect(await get('/console/figures.js')).toEqual(file);
    expect(await get('/console')).toEqual(page);
    expect((await get('/console/style.css')).status).toBe(200);
  });

  it('refuses to start without one of its files', async () => {
    dir = await mkdtemp(join(tmpdir(), 'console-'));
    await cp(CONSOLE, dir, { recursive: true });
    await rm(join(dir, 'charts.js'));
    app = Fastify();
    await expect(app.register(consoleRoutes, { readEachRequest: false, dir }).ready()).rejects.toThrow(/charts\.js/);
  });
});
