import { addCounts, emptyCounts, type HourUsage, type UsageCounts } from './usage-history.js';

/*
 * What the admin API and the console read of the usage history, built from its hours: a key's
 * series (JSON or CSV, for billing) and the busiest keys of a window with totals per plan. These
 * decide nothing; the history's own rules are in usage-history.ts.
 */

/** The counts with `refused` (limited and banned together: the 429s, not the 402s) beside them. */
export type Counts = UsageCounts & { refused: number };

export function withRefused(counts: UsageCounts): Counts {
  return { ...counts, refused: counts.limited + counts.banned };
}

/** The totals of many hours. */
export function sumOf(hours: HourUsage[]): UsageCounts {
  const totals = emptyCounts();
  for (const usage of hours) addCounts(totals, usage);
  return totals;
}

/**
 * Every step of [from, to) with its counts, empty ones included, so a chart or an invoice sees
 * each hour (or day) once.
 */
export function series(hours: HourUsage[], from: number, to: number, step: number): Array<{ start: number } & Counts> {
  const byStart = new Map<number, UsageCounts>();
  for (const usage of hours) {
    const start = usage.hour - ((usage.hour - from) % step);
    let counts = byStart.get(start);
    if (!counts) {
      counts = emptyCounts();
      byStart.set(start, counts);
    }
    addCounts(counts, usage);
  }
  const out: Array<{ start: number } & Counts> = [];
  for (let start = from; start < to; start += step)
    out.push({ start, ...withRefused(byStart.get(start) ?? emptyCounts()) });
  return out;
}

const CSV_COLUMNS = [
  'start',
  'admitted',
  'limited',
  'banned',
  'refused',
  'forbidden',
  'units',
  'upstreamFailed',
  // Last: a column added after the others leaves every earlier column where readers found it.
  'outOfCredits',
] as const;

/**
 * The series as CSV, one row per step, for billing; each row says where it ends, as steps differ
 * in length (local days of 23 to 25 hours, billing periods).
 */
export function toCsv(rows: Array<{ start: string; end: string } & Counts>): string {
  const columns: ReadonlyArray<keyof (typeof rows)[number]> = ['start', 'end', ...CSV_COLUMNS.slice(1)];
  const lines = [columns.join(',')];
  for (const row of rows) lines.push(columns.map((column) => row[column]).join(','));
  return `${lines.join('\n')}\n`;
}

/** Reads many keys' hours at once, a bounded number at a time. */
export async function hoursOfKeys(
  read: (keyId: string) => Promise<HourUsage[]>,
  keyIds: string[],
): Promise<Array<[string, HourUsage[]]>> {
  const out: Array<[string, HourUsage[]]> = [];
  for (let i = 0; i < keyIds.length; i += 200) {
    const chunk = keyIds.slice(i, i + 200);
    const read200 = await Promise.all(chunk.map(async (id) => [id, await read(id)] as [string, HourUsage[]]));
    out.push(...read200);
  }
  return out;
}

export type TopSort = 'admitted' | 'refused' | 'units' | 'forbidden' | 'upstreamFailed';

export interface TopKeys {
  totals: Counts & { keys: number };
  /** Totals per plan (each key under its plan now), the busiest first. */
  plans: Array<{ plan: string; keys: number } & Counts>;
  /** Every key with usage in the window, sorted by `sort`. */
  keys: Array<{ id: string; name: string; plan: string; revoked: boolean } & Counts>;
}

/** The keys with usage in a window, by `sort`, and the totals of all of them and of each plan. */
export function topKeys(
  perKey: Array<[string, HourUsage[]]>,
  records: ReadonlyMap<string, { name: string; plan: string; revokedAt?: string }>,
  sort: TopSort,
): TopKeys {
  const totals = emptyCounts();
  const plans = new Map<string, UsageCounts & { keys: number }>();
  const keys: TopKeys['keys'] = [];
  for (const [id, hours] of perKey) {
    if (hours.length === 0) continue;
    const counts = sumOf(hours);
    addCounts(totals, counts);
    const record = records.get(id);
    const plan = record?.plan ?? '(unknown key)';
    let planTotals = plans.get(plan);
    if (!planTotals) {
      planTotals = { ...emptyCounts(), keys: 0 };
      plans.set(plan, planTotals);
    }
    addCounts(planTotals, counts);
    planTotals.keys++;
    keys.push({ id, name: record?.name ?? '', plan, revoked: Boolean(record?.revokedAt), ...withRefused(counts) });
  }
  keys.sort((a, b) => b[sort] - a[sort] || b.admitted - a.admitted || a.id.localeCompare(b.id));
  return {
    totals: { ...withRefused(totals), keys: keys.length },
    plans: [...plans]
      .map(([plan, counts]) => ({ plan, ...withRefused(counts), keys: counts.keys }))
      .sort((a, b) => b.admitted + b.refused - (a.admitted + a.refused) || a.plan.localeCompare(b.plan)),
    keys,
  };
}

/**
 * The customers with usage in a window, by `sort`, from their own hours (the sum of their keys',
 * written with them). Apart from the keys' totals, which already hold every request once.
 */
export function topCustomers(perCustomer: Array<[string, HourUsage[]]>, sort: TopSort): Array<{ id: string } & Counts> {
  const customers: Array<{ id: string } & Counts> = [];
  for (const [id, hours] of perCustomer) if (hours.length > 0) customers.push({ id, ...withRefused(sumOf(hours)) });
  return customers.sort((a, b) => b[sort] - a[sort] || b.admitted - a.admitted || a.id.localeCompare(b.id));
}
