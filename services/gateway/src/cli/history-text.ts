import { printable, table, when } from './format.js';

interface Counts {
  admitted: number;
  limited: number;
  banned: number;
  refused: number;
  forbidden: number;
  units: number;
  upstreamFailed: number;
}

export interface History {
  id: string;
  granularity: 'hour' | 'day';
  from: string;
  to: string;
  totals: Counts;
  series: Array<{ start: string } & Counts>;
}

export interface Top {
  window: string;
  from: string;
  to: string;
  sort: string;
  totals: Counts & { keys: number };
  plans: Array<{ plan: string; keys: number } & Counts>;
  keys: Array<{ id: string; name: string; plan: string; revoked: boolean } & Counts>;
}

/** Widest bar, in cells: fits an 80-column terminal beside the label and the figures. */
const BAR_CELLS = 36;
const EIGHTHS = ['', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];

/** A bar of `value` out of `max` in BAR_CELLS cells, to an eighth of a cell; any non-zero value shows. */
function bar(value: number, max: number, cells = BAR_CELLS): string {
  if (value <= 0 || max <= 0) return '';
  const eighths = Math.max(1, Math.round((value / max) * cells * 8));
  return '█'.repeat(Math.floor(eighths / 8)) + (EIGHTHS[eighths % 8] ?? '');
}

/**
 * A key's history as a chart a terminal shows: a row per day (or hour), admitted as a solid bar
 * and refused as a light one on one scale, the figures beside them.
 */
export function historyChart(history: History): string {
  const max = Math.max(1, ...history.series.map((s) => s.admitted + s.refused));
  const label = (start: string) =>
    history.granularity === 'day' ? start.slice(0, 10) : `${start.slice(0, 13).replace('T', ' ')}h`;
  const lines = [
    `${printable(history.id)}: ${history.granularity === 'day' ? 'daily' : 'hourly'} from ${when(history.from)} to ${when(history.to)} (█ admitted, ░ refused)`,
  ];
  for (const s of history.series) {
    const admitted = bar(s.admitted, max);
    const refused = s.refused > 0 ? '░'.repeat(Math.max(1, Math.round((s.refused / max) * BAR_CELLS))) : '';
    const figures =
      s.admitted + s.refused + s.upstreamFailed === 0
        ? ''
        : `${s.admitted}${s.refused ? ` +${s.refused} refused` : ''}${s.upstreamFailed ? ` +${s.upstreamFailed} failed upstream` : ''}`;
    lines.push(`${label(s.start)}  ${`${admitted}${refused}`.padEnd(BAR_CELLS + 2)} ${figures}`.trimEnd());
  }
  const t = history.totals;
  lines.push(
    `total: ${t.admitted} admitted (${t.units} units), ${t.refused} refused (${t.limited} by limit, ${t.banned} by ban), ${t.forbidden} forbidden` +
      (t.upstreamFailed ? `, ${t.upstreamFailed} failed upstream (counted against the limit, not billed)` : ''),
  );
  return `${lines.join('\n')}\n`;
}

export function topTable(top: Top): string {
  const keys = table(
    ['KEY', 'NAME', 'PLAN', 'ADMITTED', 'REFUSED', 'FORBIDDEN', 'UNITS', 'FAILED UPSTREAM'],
    top.keys.map((k) => [
      `${k.id}${k.revoked ? ' (revoked)' : ''}`,
      k.name,
      k.plan,
      String(k.admitted),
      String(k.refused),
      String(k.forbidden),
      String(k.units),
      String(k.upstreamFailed),
    ]),
  );
  const plans = table(
    ['PLAN', 'KEYS', 'ADMITTED', 'REFUSED', 'UNITS'],
    top.plans.map((p) => [p.plan, String(p.keys), String(p.admitted), String(p.refused), String(p.units)]),
  );
  const t = top.totals;
  return (
    `top keys by ${top.sort}, ${top.window} from ${when(top.from)} to ${when(top.to)}\n${top.keys.length > 0 ? keys : '(no requests)\n'}` +
    `\nby plan\n${plans}total: ${t.keys} keys, ${t.admitted} admitted, ${t.refused} refused${t.upstreamFailed ? `, ${t.upstreamFailed} failed upstream` : ''}\n`
  );
}
