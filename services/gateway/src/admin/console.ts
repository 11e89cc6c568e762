import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS } from '../keys/key-operations.js';
import { MAX_ANCHOR_DAY } from '../limits/billing-period.js';
import { WINDOWS } from '../limits/windows.js';
import { SCOPES } from '../plans/plans.js';
import {
  type Asset,
  CSS,
  JS,
  packageDir,
  pageSecurityPolicy,
  SHARED_DIR,
  SHARED_FILES,
  vendorAssets,
} from '../web-ui/shared-files.js';
import { WEBHOOK_EVENTS } from '../webhooks/event-types.js';
import { MAX_ATTEMPTS } from '../webhooks/subscriptions/webhook-store.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Served without the admin token: the console's own files, which hold no data. */
    unauthenticated?: boolean;
  }
}

const SVG = 'image/svg+xml';

/**
 * What the key and customer dialogs offer: the scopes, every window a plan or key may limit, the
 * grace bounds, the last billing anchor day.
 */
function keyRules(): Buffer {
  const windows = WINDOWS.map(({ name, field, unit, label }) => ({ name, field, unit, label }));
  return Buffer.from(
    `export const SCOPES = ${JSON.stringify(SCOPES)};\n` +
      `export const WINDOWS = ${JSON.stringify(windows)};\n` +
      `export const DEFAULT_GRACE_SECONDS = ${DEFAULT_GRACE_SECONDS};\n` +
      `export const MAX_GRACE_SECONDS = ${MAX_GRACE_SECONDS};\n` +
      `export const MAX_ANCHOR_DAY = ${MAX_ANCHOR_DAY};\n`,
  );
}

function webhookRules(): Buffer {
  return Buffer.from(
    `export const WEBHOOK_EVENTS = ${JSON.stringify(WEBHOOK_EVENTS)};\nexport const ATTEMPTS_KEPT = ${MAX_ATTEMPTS};\n`,
  );
}

/** The console's own files, served as they are (services/gateway/console). */
const OWN_FILES: ReadonlyArray<[string, string]> = [
  ...[
    'app.js',
    'ui.js',
    'keys.js',
    'customers.js',
    'billing.js',
    'webhooks.js',
    'leaks.js',
    'charts.js',
    'figures.js',
    'limit-fields.js',
  ].map((name): [string, string] => [name, JS]),
  ['favicon.svg', SVG],
  ['style.css', CSS],
];

/** The files that never change while the gateway runs: generated from its rules, or a library's. */
function fixedAssets(): Map<string, Asset> {
  const pkg = (name: string, file: string) => readFileSync(join(packageDir(name), file));
  return new Map<string, Asset>([
    // What the key and webhook pages offer and say, from the code that checks and keeps it.
    ['/console/key-rules.js', { body: keyRules(), type: JS }],
    ['/console/webhook-rules.js', { body: webhookRules(), type: JS }],
    // The browser builds of each package: plain ES modules, loaded through the page's import map.
    ...vendorAssets('/console'),
    ['/console/vendor/uplot.js', { body: pkg('uplot', 'dist/uPlot.esm.js'), type: JS }],
    ['/console/vendor/uplot.css', { body: pkg('uplot', 'dist/uPlot.min.css'), type: CSS }],
  ]);
}

interface Page {
  html: string;
  csp: string;
}

/** The console's own files, read from `dir`: once, at start, or on every request. */
interface OwnFiles {
  page(): Page;
  /** A file by its URL, or undefined for none of the console's own. */
  file(url: string): Asset | undefined;
}

function ownFiles(dir: string, eachRequest: boolean): OwnFiles {
  const types = new Map([
    ...OWN_FILES.map(([name, type]): [string, { path: string; type: string }] => [
      `/console/${name}`,
      { path: join(dir, name), type },
    ]),
    // The components and base stylesheet the portal is drawn with too (services/gateway/ui-shared).
    ...SHARED_FILES.map(([name, type]): [string, { path: string; type: string }] => [
      `/console/shared/${name}`,
      { path: join(SHARED_DIR, name), type },
    ]),
  ]);
  const readPage = (): Page => {
    const html = readFileSync(join(dir, 'index.html'), 'utf8');
    return { html, csp: pageSecurityPolicy(html, 'console/index.html', true) };
  };
  const read = (url: string): Asset | undefined => {
    const own = types.get(url);
    return own && { body: readFileSync(own.path), type: own.type };
  };
  if (eachRequest) return { page: readPage, file: read };
  const page = readPage();
  const files = new Map([...types.keys()].map((url) => [url, read(url) as Asset]));
  return { page: () => page, file: (url) => files.get(url) };
}

export interface ConsoleOptions {
  /**
   * Read the console's own files on every request, so that an edit shows on the next reload
   * (development); otherwise they are read once, at start, and a missing one stops the start.
   */
  readEachRequest: boolean;
  /** Where the console's own files are; services/gateway/console by default. */
  dir?: string;
}

/**
 * The operators' console at /console, on the admin listener: static files only, a page that
 * calls the admin API with the token the operator signs in with (kept in the tab's session
 * storage). A fixed handful of files, so a static-file plugin's directory walk and path checks
 * would serve nothing more.
 */
export async function consoleRoutes(app: FastifyInstance, options: ConsoleOptions): Promise<void> {
  const own = ownFiles(
    options.dir ?? fileURLToPath(new URL('../../console/', import.meta.url)),
    options.readEachRequest,
  );
  const fixed = fixedAssets();
  const secure = (reply: FastifyReply, csp: string) =>
    reply
      .header('content-security-policy', csp)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY');

  app.get('/console', { config: { unauthenticated: true } }, async (_request, reply) => {
    const { html, csp } = own.page();
    return secure(reply, csp).type('text/html; charset=utf-8').send(html);
  });
  // A browser asks every origin for /favicon.ico, also when it shows the admin API's JSON: the
  // console's icon, without the token, rather than a 401 in the browser's console.
  app.get('/favicon.ico', { config: { unauthenticated: true } }, async (_request, reply) =>
    reply.type(SVG).header('cache-control', 'public, max-age=86400').send(own.file('/console/favicon.svg')?.body),
  );
  app.get('/console/*', { config: { unauthenticated: true } }, async (request, reply) => {
    const url = request.url.split('?')[0] as string;
    const asset = fixed.get(url) ?? own.file(url);
    if (!asset) return reply.code(404).type('text/plain; charset=utf-8').send('Not found');
    return secure(reply, own.page().csp).type(asset.type).send(asset.body);
  });
}
