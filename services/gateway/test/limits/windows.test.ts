import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WINDOWS, type Window } from '../../src/limits/windows.js';

// The one table of windows (limits/windows.ts) that the policy, the admin API's schemas, the
// plans, the CLI, the console and the docs take their windows from: its entries follow one
// naming, keep their counters apart, and docs/limits-and-bans.md shows them as they are.

const DOCS = new URL('../../../../docs/limits-and-bans.md', import.meta.url);
const BEGIN = '<!-- windows table: services/gateway/test/limits/windows.test.ts checks it -->';
const END = '<!-- end of windows table -->';

const at = (iso: string) => Date.parse(iso);

/** 20 ms, 1 s, 1 min, 1 h, 1 day: a length as the docs write it. */
function length(ms: number): string {
  for (const [unit, size] of [
    ['day', 86_400_000],
    ['h', 3_600_000],
    ['min', 60_000],
    ['s', 1_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`;
  }
  return `${ms} ms`;
}

function counted(window: Window): string {
  const { counting } = window;
  if (counting.kind === 'calendar') return `calendar: the ${counting.period}, whatever the algorithm`;
  return `${length(window.lengthMs)}, fixed or sliding (buckets of ${length(counting.bucketMs)})`;
}

/** The table docs/limits-and-bans.md must hold, between its markers. */
function docsTable(): string {
  return [
    '| Window | `limits` field | CLI flag | Written | Counted |',
    '| --- | --- | --- | --- | --- |',
    ...WINDOWS.map((w) => `| \`${w.name}\` | \`${w.field}\` | \`${w.flag}\` | 60/${w.unit} | ${counted(w)} |`),
  ].join('\n');
}

/** A markdown table's cells, row by row, without padding (a rule row's dashes as `---`). */
function cells(table: string): string[][] {
  return table
    .trim()
    .split('\n')
    .map((row) =>
      row
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim().replace(/^-+$/, '---')),
    );
}

describe('the windows table', () => {
  it('is what docs/limits-and-bans.md shows', () => {
    const text = readFileSync(DOCS, 'utf8');
    const from = text.indexOf(BEGIN);
    const to = text.indexOf(END);
    expect(from, `docs/limits-and-bans.md needs the line ${BEGIN}`).toBeGreaterThanOrEqual(0);
    expect(to).toBeGreaterThan(from);
    // Cell by cell: the formatter pads the columns.
    expect(cells(text.slice(from + BEGIN.length, to))).toEqual(cells(docsTable()));
  });

  it('names each window one way: its field, flag and label follow its name', () => {
    for (const w of WINDOWS) {
      const title = `${w.name[0]?.toUpperCase()}${w.name.slice(1)}`;
      expect([w.field, w.flag, w.label]).toEqual([`per${title}`, `--per-${w.name}`, `Per ${w.name}`]);
    }
    expect(new Set(WINDOWS.map((w) => w.unit)).size).toBe(WINDOWS.length);
  });

  it('keeps every window in counters of its own, apart from the ban’s', () => {
    const suffixes = WINDOWS.flatMap((w) =>
      w.counting.kind === 'calendar' ? [w.counting.suffix] : [w.counting.suffixes.fixed, w.counting.suffixes.sliding],
    );
    expect(new Set(suffixes).size).toBe(suffixes.length);
    expect(suffixes).not.toContain('ban');
    expect(suffixes).not.toContain('pending');
  });

  it('lists the windows shortest first', () => {
    const lengths = WINDOWS.map((w) => w.lengthMs);
    expect(lengths).toEqual([...lengths].sort((a, b) => a - b));
  });

  it.each([
    '2026-01-01T00:00:00.000Z',
    '2026-02-28T23:59:59.999Z',
    '2028-02-29T12:00:00.000Z',
    '2026-12-31T23:59:59.999Z',
  ])('holds %s in each calendar window’s period, which starts where the one before ends', (iso) => {
    for (const w of WINDOWS) {
      if (w.counting.kind !== 'calendar') continue;
      const { start, end } = w.counting;
      const now = at(iso);
      expect(start(now)).toBeLessThanOrEqual(now);
      expect(end(now)).toBeGreaterThan(now);
      expect(end(start(now) - 1)).toBe(start(now));
      expect(start(end(now))).toBe(end(now));
    }
  });
});
