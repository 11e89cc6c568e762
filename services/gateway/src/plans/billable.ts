/**
 * Which answers to an admitted request are billed: its units counted in the usage history (and so
 * in metering and the invoice) and its credits kept. The rest are unserved: counted apart
 * (`upstreamFailed`) and their credits given back. One rule for all three, here, pure: the proxy
 * asks it once per answer (proxy.ts), and whatever gives credits back follows that answer.
 *
 * A plan's `billable` lists the statuses it bills, as PLANS_FILE writes them: a status (`500`), a
 * range (`"200-499"`, both ends in) or a class (`"4xx"`). Without one, every status but 502, 503
 * and 504 is billed. Whatever a plan lists, an answer the gateway made itself because the pets
 * service could not be reached, closed the connection or did not answer in time is never billed:
 * pets served nothing, so there is nothing to bill.
 */

/** Statuses, both ends included. */
export type StatusRange = readonly [from: number, to: number];

/** The statuses a plan bills, as ranges. */
export type BillableStatuses = readonly StatusRange[];

/** Every status but 502, 503 and 504: the pets service unreachable, unable or timed out. */
export const DEFAULT_BILLABLE: BillableStatuses = [
  [100, 501],
  [505, 599],
];

/** Who made the answer: the pets service (passed through, or replaced by an Error body of the same status), or the gateway on its behalf. */
export type AnsweredBy = 'upstream' | 'gateway';

/** Whether an admitted request answered `status` by `by` is billed, under `billable` (a plan's, or the default). */
export function isBilled(billable: BillableStatuses | undefined, status: number, by: AnsweredBy): boolean {
  if (by === 'gateway') return false;
  return (billable ?? DEFAULT_BILLABLE).some(([from, to]) => status >= from && status <= to);
}

const LOWEST = 100;
const HIGHEST = 599;
const FORMS = `a status (500), a range ("200-499") or a class ("4xx"), each within ${LOWEST}-${HIGHEST}`;

const isStatus = (n: number) => Number.isInteger(n) && n >= LOWEST && n <= HIGHEST;

function entryRange(entry: unknown): StatusRange | string {
  if (typeof entry === 'number') return isStatus(entry) ? [entry, entry] : `${entry} is not a status`;
  if (typeof entry !== 'string') return `${JSON.stringify(entry)} is not ${FORMS}`;
  const shown = JSON.stringify(entry.length > 20 ? `${entry.slice(0, 20)}…` : entry);
  const kind = /^([1-5])xx$/.exec(entry);
  if (kind) return [Number(kind[1]) * 100, Number(kind[1]) * 100 + 99];
  const range = /^(\d{3})-(\d{3})$/.exec(entry);
  if (!range) return `${shown} is not ${FORMS}`;
  const [from, to] = [Number(range[1]), Number(range[2])];
  if (!isStatus(from) || !isStatus(to)) return `${shown} is not within ${LOWEST}-${HIGHEST}`;
  if (from > to) return `${shown} runs backwards: write the lower status first`;
  return [from, to];
}

/**
 * A plan's `billable` as PLANS_FILE writes it, checked: each problem pushed naming the entry
 * (`at` is the field's path, `plans.pro.billable`), undefined returned when there is any.
 */
export function parseBillable(raw: unknown, at: string, problems: string[]): BillableStatuses | undefined {
  if (!Array.isArray(raw) || raw.length === 0) {
    problems.push(`${at} must be a non-empty list of the statuses billed: ${FORMS}`);
    return undefined;
  }
  const before = problems.length;
  const ranges: StatusRange[] = [];
  raw.forEach((entry, i) => {
    const range = entryRange(entry);
    if (typeof range === 'string') problems.push(`${at}[${i}]: ${range}`);
    else ranges.push(range);
  });
  return problems.length > before ? undefined : ranges;
}

/** The statuses as PLANS_FILE writes them back (GET /admin/plans): ranges, or single statuses. */
export function billableText(billable: BillableStatuses): (number | string)[] {
  return billable.map(([from, to]) => (from === to ? from : `${from}-${to}`));
}
