import { AdminClient } from './admin-client.js';
import { boundedInt, type Values } from './flags.js';
import { jsonLine, table, when } from './format.js';
import { usageError } from './usage.js';

/*
 * `keys metering`: the metering export (GET /admin/metering/events, docs/metering.md), a page at a
 * time from a cursor or with --all every page in turn, as a table or JSON.
 */

const FORMATS = ['cloudevents', 'stripe-meter-events'] as const;
/** The route's own bounds and default (limit 1–1000, default 100). */
const MAX_LIMIT = 1_000;
const DEFAULT_LIMIT = 100;

interface CloudEventView {
  subject: string;
  time: string;
  data: { units: number; delta: number; revision: number };
}

interface StripeEventView {
  identifier: string;
  payload: { value: string };
  timestamp: number;
}

interface EventsPage {
  events: Array<CloudEventView | StripeEventView>;
  next: string | null;
}

/** A table row: subject, hour, revision, units, delta. A Stripe event carries no units, only its delta. */
function row(event: CloudEventView | StripeEventView): string[] {
  if ('identifier' in event) {
    // The identifier is `<subject>/<hour>/<revision>`; an hour (ISO) holds no slash.
    const parts = event.identifier.split('/');
    const revision = parts.pop() ?? '';
    parts.pop();
    const hour = when(new Date(event.timestamp * 1000).toISOString()) ?? '';
    return [parts.join('/'), hour, revision, '', event.payload.value];
  }
  const { data } = event;
  return [event.subject, when(event.time) ?? '', String(data.revision), String(data.units), String(data.delta)];
}

function eventsTable(events: EventsPage['events']): string {
  return table(['SUBJECT', 'HOUR', 'REVISION', 'UNITS', 'DELTA'], events.map(row));
}

function queryFrom(values: Values): { query: URLSearchParams; limit: number } {
  const query = new URLSearchParams();
  const format = values.format ?? 'cloudevents';
  if (typeof format !== 'string' || !(FORMATS as readonly string[]).includes(format)) {
    throw usageError('metering', `--format must be ${FORMATS.join(' or ')}`);
  }
  if (format !== 'cloudevents') query.set('format', format);
  if (values.after !== undefined) {
    if (typeof values.after !== 'string' || values.after.length === 0)
      throw usageError('metering', '--after needs a value');
    query.set('after', values.after);
  }
  const limit = values.limit === undefined ? DEFAULT_LIMIT : boundedInt('metering', '--limit', values.limit, MAX_LIMIT);
  query.set('limit', String(limit));
  return { query, limit };
}

/**
 * The pager of pages.ts, for a feed that never ends: an empty page gives back the cursor it was
 * asked with, so --all stops at a page shorter than --limit, and the text names the cursor to
 * resume from (a billing job's next poll) in every case.
 */
export async function metering(values: Values): Promise<void> {
  const { query, limit } = queryFrom(values);
  const admin = AdminClient.fromEnv(process.env);
  const write = (text: string) => process.stdout.write(text);
  let shown = 0;
  for (;;) {
    const page = await admin.request<EventsPage>('GET', `/admin/metering/events?${query}`);
    if (!values.all && values.json) return void write(`${jsonLine(page)}\n`);
    if (values.json) for (const event of page.events) write(`${jsonLine(event)}\n`);
    else if (page.events.length > 0 || shown === 0) {
      write(page.events.length > 0 ? eventsTable(page.events) : 'no events\n');
    }
    shown += page.events.length;
    const last = !values.all || page.events.length < limit || page.next === null;
    if (last) {
      if (!values.json && page.next !== null) write(`next: --after ${page.next}\n`);
      return;
    }
    query.set('after', page.next as string);
  }
}
