import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// What the console (admin listener) and the portal (its own listener) serve alike, each under its
// own path on its own origin: the browser builds of preact and htm, the shared components and base
// stylesheet of services/gateway/ui-shared, and one Content-Security-Policy for a page whose only
// inline script is its import map.

export interface Asset {
  body: Buffer;
  type: string;
}

export const JS = 'text/javascript; charset=utf-8';
export const CSS = 'text/css; charset=utf-8';

/**
 * A package's folder, found from its entry point: the browser builds served here are not in the
 * packages' `exports`, so they cannot be resolved by name.
 */
export function packageDir(name: string): string {
  let dir = dirname(fileURLToPath(import.meta.resolve(name)));
  while (!existsSync(join(dir, 'package.json')) || !dir.endsWith(name)) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find the folder of the package ${name}`);
    dir = up;
  }
  return dir;
}

/**
 * Preact, its hooks and htm as plain ES modules under `${base}/vendor/`, loaded through the
 * page's import map (preact/hooks imports "preact" by name).
 */
export function vendorAssets(base: string): Array<[string, Asset]> {
  const pkg = (name: string, file: string) => readFileSync(join(packageDir(name), file));
  return [
    [`${base}/vendor/preact.js`, { body: pkg('preact', 'dist/preact.mjs'), type: JS }],
    [`${base}/vendor/preact-hooks.js`, { body: pkg('preact', 'hooks/dist/hooks.mjs'), type: JS }],
    [`${base}/vendor/htm.js`, { body: pkg('htm', 'dist/htm.module.js'), type: JS }],
  ];
}

/** services/gateway/ui-shared: the components and base stylesheet both apps are drawn with. */
export const SHARED_DIR = fileURLToPath(new URL('../../ui-shared/', import.meta.url));

/** The shared files, each served as `${base}/shared/<name>` (the import maps' "@shared/"). */
export const SHARED_FILES: ReadonlyArray<[string, string]> = [
  ['html.js', JS],
  ['components.js', JS],
  ['format.js', JS],
  ['base.css', CSS],
];

/**
 * A Content-Security-Policy that lets the page run only its own origin's files and its one inline
 * script, the import map, by its hash (which admits that exact text, and it runs no code); no
 * other origin, no inline style attribute from markup, no frame, no form posted anywhere. Images
 * from data: URLs only where the page asks (the console's charts).
 */
export function pageSecurityPolicy(html: string, page: string, dataImages = false): string {
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)?.[1];
  if (importMap === undefined) throw new Error(`${page} has no import map`);
  const hash = createHash('sha256').update(importMap).digest('base64');
  return [
    "default-src 'none'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self'",
    `img-src 'self'${dataImages ? ' data:' : ''}`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
