import { isPlainText, isUnsafeCodePoint } from '@animal-store/common/plain-text.js';

/* Plain text for people: aligned columns, and key: value blocks, every cell made printable. */

/**
 * Text from a record as it is safe to print: each control, bidi override or lone surrogate as a
 * `\u{..}` escape. The admin API refuses such names now, but older records and hand-edited keys
 * files may still hold them, and printed raw they would drive the operator's terminal.
 */
export function printable(text: string): string {
  if (isPlainText(text)) return text;
  let out = '';
  // for…of walks code points, and yields a lone surrogate as itself.
  for (const char of text) {
    const cp = char.codePointAt(0) as number;
    out += isUnsafeCodePoint(cp) ? `\\u{${cp.toString(16)}}` : char;
  }
  return out;
}

/**
 * One JSON line whose text is printable too: JSON.stringify escapes C0 controls and lone
 * surrogates but leaves DEL, C1 controls and bidi overrides raw; those (by isUnsafeCodePoint) are
 * escaped here. Surrogate pairs are left whole.
 */
export function jsonLine(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\ud7ff\ue000-\uffff]/g, (c) => {
    const unit = c.charCodeAt(0);
    return isUnsafeCodePoint(unit) ? `\\u${unit.toString(16).padStart(4, '0')}` : c;
  });
}

export function table(header: string[], given: string[][]): string {
  const rows = given.map((r) => r.map(printable));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

export function fields(pairs: Array<[string, string | undefined]>): string {
  const shown = pairs
    .filter((p): p is [string, string] => p[1] !== undefined)
    .map(([k, v]): [string, string] => [k, printable(v)]);
  const width = Math.max(...shown.map(([k]) => k.length));
  return `${shown.map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${v}`).join('\n')}\n`;
}

/** `2026-11-22T13:00:00.000Z` → `2026-11-22 13:00:00Z`: shorter, still unambiguous. */
export function when(iso: string | null | undefined): string | undefined {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : undefined;
}
