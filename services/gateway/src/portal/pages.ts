import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import {
  type Asset,
  CSS,
  JS,
  pageSecurityPolicy,
  SHARED_DIR,
  SHARED_FILES,
  vendorAssets,
} from '../web-ui/shared-files.js';

/** The portal's own files (services/gateway/portal), by URL. */
const OWN_FILES: ReadonlyArray<[string, string, string]> = [
  ['/portal', 'index.html', 'text/html; charset=utf-8'],
  ['/portal/portal.js', 'portal.js', JS],
  ['/portal/account.js', 'account.js', JS],
  ['/portal/usage.js', 'usage.js', JS],
  ['/portal/history.js', 'history.js', JS],
  ['/portal/keys.js', 'keys.js', JS],
  ['/portal/invoice.js', 'invoice.js', JS],
  ['/portal/style.css', 'style.css', CSS],
  ['/portal/favicon.svg', 'favicon.svg', 'image/svg+xml'],
];

export interface PagesOptions {
  /** Read the files on every request (development: an edit shows on reload), else once at start. */
  readEachRequest: boolean;
  /** Where the files are; services/gateway/portal by default. */
  dir?: string;
}

/**
 * The portal's page and its files: a fixed handful, with the components and base stylesheet it
 * shares with the console (under /portal/shared/) and preact and htm (under /portal/vendor/), all
 * from the portal's own origin, each served with the page's CSP and without cookies' help.
 */
export async function portalPages(app: FastifyInstance, options: PagesOptions): Promise<void> {
  const dir = options.dir ?? fileURLToPath(new URL('../../portal/', import.meta.url));
  const files = new Map<string, { path: string; type: string }>([
    ...OWN_FILES.map(([url, name, type]): [string, { path: string; type: string }] => [
      url,
      { path: join(dir, name), type },
    ]),
    ...SHARED_FILES.map(([name, type]): [string, { path: string; type: string }] => [
      `/portal/shared/${name}`,
      { path: join(SHARED_DIR, name), type },
    ]),
  ]);
  const read = (url: string): Asset => {
    const file = files.get(url) as { path: string; type: string };
    return { body: readFileSync(file.path), type: file.type };
  };
  const policy = (html: Buffer) => pageSecurityPolicy(html.toString('utf8'), 'portal/index.html');
  const held = options.readEachRequest ? null : new Map([...files.keys()].map((url) => [url, read(url)]));
  const heldPolicy = held ? policy((held.get('/portal') as Asset).body) : null;
  const vendor = new Map(vendorAssets('/portal'));
  for (const url of [...files.keys(), ...vendor.keys()]) {
    app.get(url, async (_request, reply) => {
      const asset = vendor.get(url) ?? held?.get(url) ?? read(url);
      return reply
        .header('content-security-policy', heldPolicy ?? policy(read('/portal').body))
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('x-frame-options', 'DENY')
        .type(asset.type)
        .send(asset.body);
    });
  }
}
