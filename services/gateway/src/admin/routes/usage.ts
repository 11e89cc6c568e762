import { ApiError, clipped } from '@animal-store/common/errors.js';
import { readRfc3339 } from '@animal-store/common/rfc3339.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import {
  addCounts,
  DAY_MS,
  emptyCounts,
  HOUR_MS,
  type HourUsage,
  type UsageCounts,
} from '../../usage/usage-history.js';
import { HistoryQuery, HistorySchema, KeyIdParams, TopQuery, TopSchema } from '../schemas.js';
import { type AdminRouteOptions, errors, findKey, iso } from '../shared.js';
import { unavailable } from '../store-unavailable.js';

type Granularity = 'hour' | 'day';
type Counts = UsageCounts & { refused: number };

function withRefused(counts: UsageCounts): Counts {
  return { ...counts, refused: counts.limited + counts.banned };
}

/** An instant from the query: RFC 3339 date-time or a date (midnight UTC), one that exists. */
function instant(text: string, name: string): number {
  const read = readRfc3339(text, true);
  if (read.problem === undefined) return read.ms;
  throw new ApiError(
    400,
    'invalid_request',
    read.problem === 'calendar'
      ? `${name} is not a real date and time: "${clipped(text)}"`
      : `${name} must be an RFC 3339 date-time or a date (YYYY-MM-DD), not "${clipped(text)}"`,
  );
}

type HistoryRange = Pick<Static<typeof HistoryQuery>, 'from' | 'to' | 'period'>;

/** The start of the step (hour or day) holding `ms`. */
const stepStart = (ms: number, step: number) => ms - (((ms % step) + step) % step);

/**
 * The steps [from, to) a history query asks for. `from` and `to` are instants, or dates naming
 * whole UTC days: `to=2026-11-30` includes the 30th. `period` is a calendar month in UTC, the one
 * the month quota counts (`current`: so far; `previous`: all of it). A range reaching past now ends
 * with the step that holds now, so "this month so far" is one request on any day of it.
 */
function historyRange(query: HistoryRange, now: number, step: number): { from: number; to: number } {
  const current = stepStart(now, step) + step;
  if (query.period !== undefined) {
    if (query.from !== undefined || query.to !== undefined) {
      throw new ApiError(
        400,
        'invalid_request',
        'period names the range itself: give period, or from and to, not both',
      );
    }
    const today = new Date(now);
    const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
    if (query.period === 'current') return { from: monthStart, to: current };
    return { from: Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 1, 1), to: monthStart };
  }
  let to = current;
  if (query.to !== undefined) {
    const end = instant(query.to, 'to') + (/^\d{4}-\d{2}-\d{2}$/.test(query.to) ? DAY_MS : 0);
    to = Math.min(stepStart(end + step - 1, step), current);
  }
  const from =
    query.from === undefined
      ? to - (step === HOUR_MS ? 24 * HOUR_MS : 30 * DAY_MS)
      : stepStart(instant(query.from, 'from'), step);
  if (from >= current) {
    throw new ApiError(
      400,
      'invalid_request',
      `from must not be after the current ${step === HOUR_MS ? 'hour' : 'day'}`,
    );
  }
  if (from >= to) throw new ApiError(400, 'invalid_request', 'from must be before to');
  return { from, to };
}

/**
 * Every step of [from, to) with its counts, empty ones included, so a chart or an invoice sees
 * each hour (or day) once.
 */
function series(hours: HourUsage[], from: number, to: number, step: number): Array<{ start: number } & Counts> {
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
] as const;

function toCsv(rows: Static<typeof HistorySchema>['series']): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const row of rows) lines.push(CSV_COLUMNS.map((column) => row[column]).join(','));
  return `${lines.join('\n')}\n`;
}

/** Reads many keys' hours at once, a bounded number at a time. */
async function hoursOfKeys(
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

/**
 * Usage over time: a key's hourly or daily series (JSON, or CSV for billing) and the busiest keys
 * of a window with totals per plan. Both read the usage history, not the live windows.
 */
export const usageRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, { deps }) => {
  const history = deps.history;
  const retentionDays = Math.round(history.retentionMs / DAY_MS);

  function historyUnavailable(err: unknown, log: { error(obj: object, msg: string): void }): never {
    log.error({ err }, 'cannot read the usage history');
    throw unavailable('rate_limiter_unavailable', 'Cannot reach Redis to read the usage history');
  }

  app.get(
    '/admin/keys/:id/usage/history',
    {
      schema: {
        params: KeyIdParams,
        querystring: HistoryQuery,
        response: { 200: HistorySchema, ...errors },
      },
    },
    async (request, reply) => {
      const { record } = await findKey(deps, request.params.id);
      const granularity: Granularity = request.query.granularity ?? 'hour';
      const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
      const now = deps.now();
      const { from, to } = historyRange(request.query, now, step);
      const oldest = stepStart(now - history.retentionMs, step);
      if (from < oldest) {
        throw new ApiError(
          400,
          'invalid_request',
          `The history is kept for ${retentionDays} days (USAGE_HISTORY_DAYS): from must be on or after ${iso(oldest)}`,
        );
      }
      let hours: HourUsage[];
      try {
        hours = await history.hours(record.id, from, to);
      } catch (err) {
        historyUnavailable(err, request.log);
      }
      const totals = emptyCounts();
      for (const usage of hours) addCounts(totals, usage);
      const body = {
        id: record.id,
        granularity,
        from: iso(from),
        to: iso(to),
        retentionDays,
        totals: withRefused(totals),
        series: series(hours, from, to, step).map(({ start, ...counts }) => ({ start: iso(start), ...counts })),
      };
      const wantsCsv =
        request.query.format === 'csv' ||
        (request.query.format === undefined && /\btext\/csv\b/.test(request.headers.accept ?? ''));
      if (!wantsCsv) return body;
      const file = `usage-${record.id}-${body.from.slice(0, 13)}-${granularity}.csv`;
      return (
        reply
          .type('text/csv; charset=utf-8')
          .header('content-disposition', `attachment; filename="${file.replace(/[^\w.:-]/g, '_')}"`)
          // A string body with its own type is sent as it is: the 200 schema describes the JSON answer.
          .send(toCsv(body.series) as never)
      );
    },
  );

  app.get(
    '/admin/usage',
    { schema: { querystring: TopQuery, response: { 200: TopSchema, ...errors } } },
    async (request) => {
      const window = request.query.window ?? '24h';
      const sort = request.query.sort ?? 'admitted';
      const limit = request.query.limit ?? 20;
      const hoursInWindow = Number(window.slice(0, -1)) * (window.endsWith('d') ? 24 : 1);
      if (hoursInWindow * HOUR_MS > history.retentionMs) {
        throw new ApiError(
          400,
          'invalid_request',
          `The history is kept for ${retentionDays} days: window ${window} is longer`,
        );
      }
      const now = deps.now();
      const to = now - (now % HOUR_MS) + HOUR_MS;
      const from = to - hoursInWindow * HOUR_MS;
      let perKey: Array<[string, HourUsage[]]>;
      try {
        const ids = await history.activeKeys(from, to);
        perKey = await hoursOfKeys((id) => history.hours(id, from, to), ids);
      } catch (err) {
        historyUnavailable(err, request.log);
      }
      const records = new Map((await deps.keyStore.list()).map((r) => [r.id, r]));
      for (const r of deps.keyResolver.fileRecords()) records.set(r.id, r);

      const totals = emptyCounts();
      const plans = new Map<string, UsageCounts & { keys: number }>();
      const keys: Static<typeof TopSchema>['keys'] = [];
      for (const [id, hours] of perKey) {
        if (hours.length === 0) continue;
        const counts = emptyCounts();
        for (const usage of hours) addCounts(counts, usage);
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
        keys.push({
          id,
          name: record?.name ?? '',
          plan,
          revoked: Boolean(record?.revokedAt),
          ...withRefused(counts),
        });
      }
      keys.sort((a, b) => b[sort] - a[sort] || b.admitted - a.admitted || a.id.localeCompare(b.id));
      const hourly = series(
        perKey.flatMap(([, hours]) => hours),
        from,
        to,
        HOUR_MS,
      );
      return {
        window,
        from: iso(from),
        to: iso(to),
        sort,
        totals: { ...withRefused(totals), keys: keys.length },
        plans: [...plans]
          .map(([plan, counts]) => ({ plan, ...withRefused(counts), keys: counts.keys }))
          .sort((a, b) => b.admitted + b.refused - (a.admitted + a.refused) || a.plan.localeCompare(b.plan)),
        hours: hourly.map(({ start, ...counts }) => ({ start: iso(start), ...counts })),
        keys: keys.slice(0, limit),
      };
    },
  );
};
