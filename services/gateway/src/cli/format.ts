/** Plain text for people: aligned columns, and key: value blocks. */

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

export function fields(pairs: Array<[string, string | undefined]>): string {
  const shown = pairs.filter((p): p is [string, string] => p[1] !== undefined);
  const width = Math.max(...shown.map(([k]) => k.length));
  return `${shown.map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${v}`).join('\n')}\n`;
}

/** `2026-11-22T13:00:00.000Z` → `2026-11-22 13:00:00Z`: shorter, still unambiguous. */
export function when(iso: string | null | undefined): string | undefined {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : undefined;
}
