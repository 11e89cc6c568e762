import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

/**
 * The page runs its own files only: no inline script at all (not even an import map), no other
 * origin, no style attribute from markup, no frame, no form posted anywhere.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const JS = 'text/javascript; charset=utf-8';

/** Money as the console writes it: the portal serves the console's own file (console/money.js). */
const MONEY = fileURLToPath(new URL('../../console/money.js', import.meta.url));

const FILES: ReadonlyArray<[string, string, string]> = [
  ['/portal', 'index.html', 'text/html; charset=utf-8'],
  ['/portal/portal.js', 'portal.js', JS],
  ['/portal/invoice.js', 'invoice.js', JS],
  ['/portal/money.js', MONEY, JS],
  ['/portal/style.css', 'style.css', 'text/css; charset=utf-8'],
  ['/portal/favicon.svg', 'favicon.svg', 'image/svg+xml'],
];

export interface PagesOptions {
  /** Read the files on every request (development: an edit shows on reload), else once at start. */
  readEachRequest: boolean;
  /** Where the files are; services/gateway/portal by default. */
  dir?: string;
}

/** The portal's page and its files: a fixed handful, served with the CSP and without cookies' help. */
export async function portalPages(app: FastifyInstance, options: PagesOptions): Promise<void> {
  const dir = options.dir ?? fileURLToPath(new URL('../../portal/', import.meta.url));
  const read = (name: string) => readFileSync(isAbsolute(name) ? name : join(dir, name));
  const held = new Map(FILES.map(([, name]) => [name, options.readEachRequest ? null : read(name)]));
  for (const [url, name, type] of FILES) {
    app.get(url, async (_request, reply) =>
      reply
        .header('content-security-policy', CONTENT_SECURITY_POLICY)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('x-frame-options', 'DENY')
        .type(type)
        .send(held.get(name) ?? read(name)),
    );
  }
}
