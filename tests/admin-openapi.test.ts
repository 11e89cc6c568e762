import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildAdminApp } from '@animal-store/gateway/admin/app.js';
import { ADMIN_OPERATIONS } from '@animal-store/gateway/admin/reference-operations.js';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '@animal-store/gateway/test/support/helpers.js';
import type { FastifyInstance } from 'fastify';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import { chromium } from 'playwright-core';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MissingPrerequisite, which } from './support/runtime.js';
import { REPO_ROOT } from './support/stack.js';
import { typeErrors } from './support/type-check.js';

/**
 * The admin API's reference: GET /admin/openapi.json (behind the admin token) lists every admin
 * route fastify has, with its words, schemas and errors; /admin/docs, the page, is served without
 * the token and loads only what it needs; and a client generated from the document, as an
 * operator's tooling would make one, type-checks and runs against a running admin listener.
 */

const AUTH = { authorization: `Bearer ${ADMIN_TOKEN}` };
const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;
/** The reference itself: its document and its page with its files, not operations of the API. */
const REFERENCE_ITSELF = /^\/admin\/(openapi\.json$|docs(\/|$))/;

let gateway: TestGateway;
let admin: FastifyInstance;
let doc: OpenAPI3;

beforeAll(async () => {
  gateway = await startGateway();
  admin = await buildAdminApp(gateway.config, gateway.deps);
  await admin.ready();
  const res = await admin.inject({ url: '/admin/openapi.json', headers: AUTH });
  expect(res.statusCode).toBe(200);
  doc = res.json();
});

afterAll(async () => {
  await admin?.close();
  await gateway?.close();
});

/** The admin listener's address, listening on a free port the first time it is asked. */
async function listening(app: FastifyInstance): Promise<string> {
  if (!app.server.listening) await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** Every route fastify holds, as `METHOD /url` (`:id` as registered), HEAD (fastify's own twin of a GET) aside. */
function fastifyRoutes(app: FastifyInstance): string[] {
  // printRoutes draws the router's tree, four columns a level: each line a segment, its methods after it.
  const segments: string[] = [];
  const routes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (.+?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = (m[1] as string).length / 4;
    segments.length = depth;
    segments.push(m[2] as string);
    for (const method of (m[3] ?? '').split(', ').filter((x) => x !== '' && x !== 'HEAD')) {
      routes.push(`${method} ${segments.join('')}`);
    }
  }
  return routes;
}

/** The document's operations as `METHOD /url`, its `{id}` back to fastify's `:id`. */
function documentedRoutes(): string[] {
  return Object.entries(doc.paths ?? {}).flatMap(([path, item]) =>
    METHODS.filter((m) => (item as Record<string, unknown>)[m] !== undefined).map(
      (m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`,
    ),
  );
}

type Operation = {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: Array<{ in: string; name: string }>;
  requestBody?: unknown;
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
};

function operations(): Array<[string, Operation]> {
  return Object.entries(doc.paths ?? {}).flatMap(([path, item]) =>
    METHODS.flatMap((m) => {
      const op = (item as Record<string, Operation | undefined>)[m];
      return op ? [[`${m.toUpperCase()} ${path}`, op] as [string, Operation]] : [];
    }),
  );
}

describe('GET /admin/openapi.json', () => {
  it('lists every admin route fastify has, and nothing else', () => {
    const routes = fastifyRoutes(admin);
    // The parse of the tree is checked against the router itself, but for wildcards: the tree
    // draws one without the static part just before it (`/console/*` as `/console*`).
    for (const route of routes.filter((r) => !r.includes('*'))) {
      const [method, url] = route.split(' ') as [string, string];
      expect(admin.hasRoute({ method: method as 'GET', url }), route).toBe(true);
    }
    const api = routes.filter(
      (r) => r.split(' ')[1]?.startsWith('/admin/') && !REFERENCE_ITSELF.test(r.split(' ')[1] ?? ''),
    );
    expect(api.length).toBeGreaterThanOrEqual(37);
    expect(documentedRoutes().sort()).toEqual(api.sort());
    // Outside /admin: the console's page and files, and its icon; pages, not operations.
    for (const route of routes.filter((r) => !r.split(' ')[1]?.startsWith('/admin/'))) {
      expect(route).toMatch(/^GET \/(console|favicon\.ico)/);
    }
    // The words table has a row for each route and no more.
    expect(Object.keys(ADMIN_OPERATIONS).sort()).toEqual(api.sort());
  });

  it('names, describes and tags every operation, with the errors every admin route may answer', () => {
    const ids = new Set<string>();
    for (const [name, op] of operations()) {
      expect(op.operationId, name).toMatch(/^[a-z][A-Za-z]+$/);
      ids.add(op.operationId as string);
      expect(op.summary, name).toBeTruthy();
      expect(op.description, name).toBeTruthy();
      expect(doc.tags?.map((t) => t.name)).toContain(op.tags?.[0]);
      // The token check's 401 and its lockout's 429; a store away is 503, never 500.
      for (const status of ['401', '429', '503']) {
        expect(op.responses[status]?.content?.['application/json']?.schema, `${name} ${status}`).toEqual({
          $ref: '#/components/schemas/Error',
        });
      }
      expect(op.responses['500'], name).toBeUndefined();
      // A JSON body: 415 for another.
      if (op.requestBody) expect(op.responses['415'], name).toBeDefined();
    }
    expect(ids.size).toBe(operations().length);
    expect(doc.security).toEqual([{ adminToken: [] }]);
    expect(doc.components?.securitySchemes?.adminToken).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('gives the creates their Idempotency-Key and 422, and the CSV routes text/csv beside JSON', () => {
    const byName = Object.fromEntries(operations());
    for (const name of [
      'POST /admin/keys',
      'POST /admin/keys/{id}/rotate',
      'POST /admin/customers',
      'POST /admin/customers/{id}/credits',
      'POST /admin/keys/{id}/credits',
      'POST /admin/webhooks',
    ]) {
      expect(byName[name]?.parameters, name).toContainEqual(
        expect.objectContaining({ in: 'header', name: 'idempotency-key' }),
      );
      expect(byName[name]?.responses['422'], name).toBeDefined();
    }
    expect(byName['PATCH /admin/keys/{id}']?.parameters ?? []).not.toContainEqual(
      expect.objectContaining({ name: 'idempotency-key' }),
    );
    const csv = operations()
      .filter(([, op]) => op.responses['200']?.content?.['text/csv'])
      .map(([name]) => name);
    expect(csv.sort()).toEqual([
      'GET /admin/customers/{id}/invoice-preview',
      'GET /admin/customers/{id}/usage/history',
      'GET /admin/keys/{id}/invoice-preview',
      'GET /admin/keys/{id}/usage/history',
    ]);
  });

  it('needs the admin token, as every admin route does', async () => {
    for (const headers of [{}, { authorization: 'Bearer not-the-token' }]) {
      const res = await admin.inject({ url: '/admin/openapi.json', headers });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ code: 'unauthorized', message: expect.any(String), status: 401 });
      expect(res.body).not.toContain('/admin/keys');
    }
  });
});

describe('/admin/docs', () => {
  it('is served without the token, with a strict CSP, and loads only files served without it', async () => {
    const page = await admin.inject({ url: '/admin/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['content-security-policy']).not.toContain('unsafe');
    // The page holds no part of the document: it fetches it with the token it asks for.
    expect(page.body).not.toContain('/admin/keys');
    expect(page.body).toContain('type="password"');
    const assets = [...page.body.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1] as string);
    expect(assets).toEqual(
      expect.arrayContaining([
        '/admin/docs/reference.js',
        '/admin/docs/static/swagger-ui-bundle.js',
        '/admin/docs/static/swagger-ui.css',
      ]),
    );
    for (const url of assets) {
      const res = await admin.inject({ url });
      expect(res.statusCode, url).toBe(200);
      expect(res.body.length, url).toBeGreaterThan(100);
    }
    const script = await admin.inject({ url: '/admin/docs/reference.js' });
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script.body).toContain("'/admin/openapi.json'");
    // Only the two files the page loads, not the whole folder swagger-ui ships.
    expect((await admin.inject({ url: '/admin/docs/static/index.html' })).statusCode).toBe(404);
  });
});

describe('/admin/docs in headless Chromium', () => {
  it('asks for the token, refuses a wrong one, then renders every operation, and keeps the token in the tab', {
    timeout: 90_000,
  }, async () => {
    const binary = which('chromium') ?? '/usr/bin/chromium';
    if (!which('chromium')) {
      throw new MissingPrerequisite(
        'chromium is not on PATH: this test renders /admin/docs (apt-get install chromium)',
      );
    }
    const origin = await listening(admin);
    const browser = await chromium.launch({ executablePath: binary, args: ['--no-sandbox', '--disable-gpu'] });
    try {
      const page = await browser.newPage();
      // Anything the page's CSP blocks, or a script that fails, shows as a console error.
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(message.text());
      });
      page.on('pageerror', (err) => problems.push(err.message));
      const elsewhere: string[] = [];
      page.on('request', (request) => {
        if (new URL(request.url()).origin !== origin) elsewhere.push(request.url());
      });

      await page.goto(`${origin}/admin/docs`);
      await page.getByLabel('Admin token (ADMIN_TOKEN)').fill('not-the-token');
      await page.keyboard.press('Enter');
      await page.getByText('That admin token is not valid.').waitFor();
      // The failed fetch is the one expected console error; nothing else.
      expect(problems.filter((p) => !p.includes('401'))).toEqual([]);

      await page.getByLabel('Admin token (ADMIN_TOKEN)').fill(ADMIN_TOKEN);
      await page.keyboard.press('Enter');
      await page.locator('.opblock').first().waitFor();
      const count = operations().length;
      await expect.poll(() => page.locator('.opblock').count()).toBe(count);
      await expect(page.locator('#operations-credits-changeCustomerCredits').count()).resolves.toBe(1);
      expect(await page.locator('.info .title').textContent()).toContain('Animal store admin API');

      // Reloaded in the same tab: shown at once, without asking again.
      await page.reload();
      await page.locator('.opblock').first().waitFor();
      expect(await page.locator('#signin').isHidden()).toBe(true);
      expect(problems.filter((p) => !p.includes('401'))).toEqual([]);
      expect(elsewhere).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});

/**
 * The operator's tooling: type-checked (strict) against the generated types, then run. Each
 * `@ts-expect-error` is a call the document must make a type error.
 */
const CONSUMER = `
import createClient from 'openapi-fetch';
import type { components, paths } from './schema';

type ApiError = components['schemas']['Error'];

export async function scenario(baseUrl: string, token: string) {
  const admin = createClient<paths>({ baseUrl, headers: { Authorization: \`Bearer \${token}\` } });

  const customer = await admin.POST('/admin/customers', {
    body: { name: 'Acme', plan: 'pro', externalId: 'cus_Stripe123', credits: {} },
  });
  const customerId: string | undefined = customer.data?.id;
  if (!customerId) throw new Error(\`createCustomer answered \${customer.response.status} \${JSON.stringify(customer.error)}\`);

  // A key on a plan, and a key of the customer (on its plan).
  const lone = await admin.POST('/admin/keys', { body: { plan: 'free', name: 'lone' } });
  const loneKey: string | undefined = lone.data?.key;
  const bound = await admin.POST('/admin/keys', { body: { customerId, name: 'acme-ci' } });
  const boundPlan: string | undefined = bound.data?.plan;

  const topUp = await admin.POST('/admin/customers/{id}/credits', {
    params: { path: { id: customerId }, header: { 'idempotency-key': 'top-up-1' } },
    body: { amount: 500, reason: 'first top-up' },
  });
  const again = await admin.POST('/admin/customers/{id}/credits', {
    params: { path: { id: customerId }, header: { 'idempotency-key': 'top-up-1' } },
    body: { amount: 500, reason: 'first top-up' },
  });
  const balance = await admin.GET('/admin/customers/{id}/credits', { params: { path: { id: customerId } } });
  const credits: number | undefined = balance.data?.balance;

  const missing = await admin.GET('/admin/customers/{id}', { params: { path: { id: 'cus_none' } } });
  const notFound: ApiError | undefined = missing.error;
  const badChange = await admin.POST('/admin/customers/{id}/credits', {
    params: { path: { id: customerId } },
    body: { amount: 0, reason: 'nothing' },
  });
  const invalid: ApiError | undefined = badChange.error;

  const stranger = createClient<paths>({ baseUrl });
  const refused = await stranger.GET('/admin/plans');
  const unauthorized: ApiError | undefined = refused.error;

  return {
    customer: { status: customer.response.status, id: customerId, plan: customer.data?.plan },
    lone: { status: lone.response.status, key: loneKey?.slice(0, 4), plan: lone.data?.plan },
    bound: { status: bound.response.status, plan: boundPlan, customerId: bound.data?.customerId },
    topUp: { status: topUp.response.status, amount: topUp.data?.amount, ref: topUp.data?.ref },
    again: { status: again.response.status, replayed: again.response.headers.get('Idempotent-Replayed'), ref: again.data?.ref },
    credits,
    notFound: { status: missing.response.status, body: notFound },
    invalid: { status: badChange.response.status, body: invalid },
    unauthorized: { status: refused.response.status, body: unauthorized },
  };
}

export function mistakes(admin: ReturnType<typeof createClient<paths>>) {
  return [
    // @ts-expect-error a customer needs a name
    admin.POST('/admin/customers', { body: { plan: 'pro' } }),
    // @ts-expect-error a credit change needs a reason
    admin.POST('/admin/customers/{id}/credits', { params: { path: { id: 'cus_1' } }, body: { amount: 5 } }),
    // @ts-expect-error the type is topup, grant or adjustment
    admin.POST('/admin/keys/{id}/credits', { params: { path: { id: 'key_1' } }, body: { amount: 5, reason: 'x', type: 'gift' } }),
    // @ts-expect-error the path needs its id
    admin.GET('/admin/keys/{id}', {}),
    // @ts-expect-error no such route
    admin.GET('/admin/key'),
  ];
}
`;

/** Type-checks the consumer against the generated types as a strict project would; returns the errors. */

describe('a client generated from the admin document', () => {
  it('type-checks, and creates a customer, its key and a lone key, tops up its credits once, and reads typed errors', {
    timeout: 60_000,
  }, async () => {
    // Inside the repository, so that the consumer's `openapi-fetch` resolves from its node_modules.
    const cache = join(REPO_ROOT, 'node_modules', '.cache');
    await mkdir(cache, { recursive: true });
    const dir = await mkdtemp(join(cache, 'admin-openapi-client-'));
    try {
      const adminUrl = await listening(admin);
      const served = (await (await fetch(`${adminUrl}/admin/openapi.json`, { headers: AUTH })).json()) as OpenAPI3;
      // The document names the listener that served it: paths are absolute (/admin/…) on its origin.
      const baseUrl = new URL(served.servers?.[0]?.url ?? '', `${adminUrl}/admin/openapi.json`).href.replace(/\/$/, '');
      expect(baseUrl).toBe(adminUrl);

      await writeFile(join(dir, 'schema.d.ts'), astToString(await openapiTS(served)));
      await writeFile(join(dir, 'consumer.ts'), CONSUMER);
      expect(typeErrors([join(dir, 'consumer.ts')])).toEqual([]);

      const js = ts.transpileModule(CONSUMER, {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      }).outputText;
      await writeFile(join(dir, 'consumer.mjs'), js);
      const consumer = (await import(pathToFileURL(join(dir, 'consumer.mjs')).href)) as {
        scenario(baseUrl: string, token: string): Promise<Record<string, unknown>>;
      };
      const result = await consumer.scenario(baseUrl, ADMIN_TOKEN);

      const error = (status: number, code: string) => ({ status, body: { code, message: expect.any(String), status } });
      expect(result).toEqual({
        customer: { status: 201, id: expect.stringMatching(/^cus_/), plan: 'pro' },
        lone: { status: 201, key: 'ask_', plan: 'free' },
        bound: { status: 201, plan: 'pro', customerId: (result.customer as { id: string }).id },
        topUp: { status: 201, amount: 500, ref: expect.stringMatching(/^crd_/) },
        again: { status: 201, replayed: 'true', ref: (result.topUp as { ref: string }).ref },
        credits: 500,
        notFound: error(404, 'not_found'),
        invalid: error(400, 'invalid_request'),
        unauthorized: error(401, 'unauthorized'),
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
