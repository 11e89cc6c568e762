import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The written documentation as files: the README stays a short door, every relative link in it,
 * in docs/ and in deploy/README.md reaches a file (and a heading, when it names one), every
 * repository path a page names in code exists, and the configuration page names every variable
 * the services read. Moved code shows here first: a page that still names the old place fails.
 * The manual stays one a person reads: pages and the total have a byte budget, prose lines a width.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PAGES = [
  'README.md',
  'deploy/README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** The text outside fenced code blocks, line for line (code lines blanked, so numbers stay true). */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line;
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** Every Markdown link and image target outside code, with its line. */
function links(text: string): Array<{ line: number; target: string }> {
  return prose(text).flatMap((line, i) =>
    [...line.replace(/`[^`]*`/g, '').matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => ({
      line: i + 1,
      target: m[1] as string,
    })),
  );
}

/** What is wrong with one relative link of `page`, or undefined. */
function brokenLink(page: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined;
  const [path, anchor] = target.split('#') as [string, string | undefined];
  const file = path === '' ? page : relative(ROOT, join(ROOT, dirname(page), decodeURIComponent(path)));
  if (file.startsWith('..')) return `${target} leaves the repository`;
  if (!existsSync(join(ROOT, file))) return `${target}: no file ${file}`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md') || statSync(join(ROOT, file)).isDirectory()) return `${target}: an anchor in a non-page`;
  return anchors(read(file)).has(anchor) ? undefined : `${target}: ${file} has no heading #${anchor}`;
}

const TOP = ['services', 'tests', 'deploy', 'docs', 'scripts', 'bench'];

/** The names of the repository's files (not dependencies, build output or git's own). */
function fileNames(dir = ROOT, out = new Set<string>()): Set<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (['node_modules', 'dist', 'reports', '.git'].includes(entry.name)) continue;
    if (entry.isDirectory()) fileNames(join(dir, entry.name), out);
    else out.add(entry.name);
  }
  return out;
}
const NAMES = fileNames();

/**
 * What is wrong with a path named in inline code, or undefined. Paths from the top folders are
 * checked from the repository's root; architecture.md also names gateway files from
 * services/gateway/src (or services/gateway for the console), as it says. Patterns, placeholders
 * URL paths, built output (dist/) and reports/ are not files to look for.
 */
function missingPath(page: string, code: string): string | undefined {
  const path = code.replace(/[.,:;]$/, '');
  // A bare file name: some file of the repository has it.
  if (/^[\w.-]+\.(?:ts|mjs|js)$/.test(path)) return NAMES.has(path) ? undefined : `no file is named \`${code}\``;
  if (/[\s*{}<>…$?=]|\/dist\/|\.\./.test(path) || !path.includes('/') || path.startsWith('/')) return undefined;
  const top = path.split('/')[0] as string;
  // Written by the tests and tools, not kept in the repository.
  if (top === 'reports') return undefined;
  if (TOP.includes(top)) return existsSync(join(ROOT, path)) ? undefined : `\`${code}\` does not exist`;
  if (page !== 'docs/architecture.md' || !/\/$|\.(?:ts|js|mjs)$/.test(path)) return undefined;
  const found = ['services/gateway/src', 'services/gateway'].some((base) => existsSync(join(ROOT, base, path)));
  return found ? undefined : `\`${code}\` is in neither services/gateway/src nor services/gateway`;
}

describe('the documentation', () => {
  it('keeps the README a door: at most 200 lines and 16 KB, no prose line over 120 characters', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length, 'lines').toBeLessThanOrEqual(200);
    expect(Buffer.byteLength(readme), 'bytes').toBeLessThanOrEqual(16 * 1024);
    const long = prose(readme)
      .map((line, i) => ({ line: i + 1, length: [...line].length, table: line.trimStart().startsWith('|') }))
      .filter((l) => !l.table && l.length > 120)
      .map((l) => `README.md:${l.line} has ${l.length} characters`);
    expect(long).toEqual([]);
  });

  it('keeps the manual readable: every page at most 24 KB, all of it at most 160 KB, no prose line over 160', () => {
    const manual = PAGES.filter((p) => p === 'README.md' || p.startsWith('docs/'));
    const sizes = manual.map((page) => ({ page, bytes: Buffer.byteLength(read(page)) }));
    expect(sizes.filter((s) => s.bytes > 24 * 1024).map((s) => `${s.page} has ${s.bytes} bytes`)).toEqual([]);
    expect(
      sizes.reduce((sum, s) => sum + s.bytes, 0),
      'bytes of README.md and docs/*.md',
    ).toBeLessThanOrEqual(160 * 1024);
    const long = manual.flatMap((page) =>
      prose(read(page)).flatMap((line, i) => {
        const length = [...line].length;
        return length > 160 ? [`${page}:${i + 1} has ${length} characters`] : [];
      }),
    );
    expect(long).toEqual([]);
  });

  it('links the README to every page in docs/', () => {
    const linked = new Set(links(read('README.md')).map((l) => l.target.split('#')[0]));
    const pages = PAGES.filter((p) => p.startsWith('docs/'));
    expect(pages.filter((p) => !linked.has(p))).toEqual([]);
  });

  it('has every relative link resolve to a file, and every anchor to a heading of it', () => {
    const broken = PAGES.flatMap((page) =>
      links(read(page)).flatMap(({ line, target }) => {
        const why = brokenLink(page, target);
        return why ? [`${page}:${line}: ${why}`] : [];
      }),
    );
    expect(broken).toEqual([]);
  });

  it('names only repository paths that exist', () => {
    const missing = PAGES.flatMap((page) =>
      prose(read(page)).flatMap((line, i) =>
        [...line.matchAll(/`([^`\n]+)`/g)].flatMap((m) => {
          const why = missingPath(page, m[1] as string);
          return why ? [`${page}:${i + 1}: ${why}`] : [];
        }),
      ),
    );
    expect(missing).toEqual([]);
  });

  it('names every environment variable the services read in docs/configuration.md', () => {
    const page = read('docs/configuration.md');
    const names = new Set<string>();
    for (const service of ['gateway', 'pets', 'common']) {
      const dir = join(ROOT, 'services', service, 'src');
      for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))) {
        const source = readFileSync(join(dir, file), 'utf8');
        // The config readers (r.int('NAME', …), read.string(…), r.oneOf(…)) and direct env reads.
        for (const m of source.matchAll(/\b(?:r|read|reader)\.[a-zA-Z]+\(\s*'([A-Z][A-Z0-9_]+)'/g))
          names.add(m[1] as string);
        for (const m of source.matchAll(/\benv\.([A-Z][A-Z0-9_]+)\b/g)) names.add(m[1] as string);
      }
    }
    expect(names.size).toBeGreaterThan(40);
    expect([...names].filter((name) => !page.includes(`\`${name}\``) && !page.includes(`${name}=`))).toEqual([]);
  });
});
