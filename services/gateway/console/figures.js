// @ts-check
// What the pages compute before they draw: times, statuses, limits, totals and bar sizes. Plain
// functions with no imports, so tests run them without a browser (figures.test.ts).

/**
 * An instant as the console shows it: to the second, on the clock of `timeZone` (a customer's
 * billing zone; UTC for a key of no customer and for what belongs to no customer), which it names:
 * `2026-11-26 13:34:56 Europe/Paris`, `2026-11-26 12:34:56 UTC`.
 * @param {string | null | undefined} iso
 * @param {string} [timeZone] IANA
 */
export function when(iso, timeZone = 'UTC') {
  if (!iso) return '—';
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-CA', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    })
      .formatToParts(new Date(iso))
      .map((p) => [p.type, p.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${timeZone}`;
}

/**
 * The start of an hour of the history on the clock of `timeZone`, as a chart's figures name it:
 * `2026-11-26 13h`, or `2026-11-26 18:30` in a zone half an hour off UTC's hours.
 * @param {string} iso
 * @param {string} timeZone IANA
 */
export function localHour(iso, timeZone) {
  const local = when(iso, timeZone);
  return local.slice(14, 16) === '00' ? `${local.slice(0, 13)}h` : local.slice(0, 16);
}

/**
 * Whether an instant (ISO text) is still to come: a grace that ended is not shown as one.
 * @param {string | null | undefined} iso
 */
export function ahead(iso, now = Date.now()) {
  return iso ? Date.parse(iso) > now : false;
}

/**
 * A `datetime-local` field's value read as UTC, as its label says (the field itself has no zone,
 * and the browser's own would silently shift it).
 * @param {string} value
 */
export function utcInstant(value) {
  return new Date(`${value.length === 16 ? `${value}:00` : value}Z`).toISOString();
}

/**
 * A key's state in one word, the first that applies: revoked, expired, banned, active.
 * @param {Pick<import('./types.js').KeyView, 'revokedAt' | 'expiresAt' | 'bannedUntil'>} key
 */
export function statusOf(key, now = Date.now()) {
  if (key.revokedAt) return 'revoked';
  if (key.expiresAt && Date.parse(key.expiresAt) <= now) return 'expired';
  if (key.bannedUntil) return 'banned';
  return 'active';
}

/**
 * `60/min, 1000/day`: limits in the order given, each with its window's unit.
 * @param {Record<string, number> | null | undefined} limits
 * @param {ReadonlyArray<{ field: string, unit: string }>} windows
 */
export function limitsText(limits, windows) {
  const units = Object.fromEntries(windows.map((w) => [w.field, w.unit]));
  return Object.entries(limits ?? {})
    .map(([k, v]) => `${v}/${units[k] ?? k}`)
    .join(', ');
}

/**
 * The addresses typed one per line (or separated by commas or spaces), or null for none.
 * @param {unknown} text
 */
export function cidrsOf(text) {
  const cidrs = String(text ?? '')
    .split(/[\s,]+/)
    .filter(Boolean);
  return cidrs.length > 0 ? cidrs : null;
}

/**
 * Every decision of a period: admitted, refused by a limit or a ban (429), refused for want of
 * credits (402), refused a scope or address (403); null before the totals are in.
 * @param {{ admitted: number, refused: number, outOfCredits: number, forbidden: number } | undefined} totals
 */
export function requestsOf(totals) {
  return totals ? totals.admitted + totals.refused + totals.outOfCredits + totals.forbidden : null;
}

/**
 * The share of requests refused by a limit or a ban (429), in whole percent; null when there were none.
 * @param {{ admitted: number, refused: number, outOfCredits: number, forbidden: number } | undefined} totals
 */
export function refusedPercent(totals) {
  const requests = requestsOf(totals);
  return totals && requests ? Math.round((100 * totals.refused) / requests) : null;
}

/**
 * Whether a balance pays for no request at all: the cheapest costs 1 credit (routes may cost
 * more, PLANS_FILE's routeCosts), so a balance below 1 is refused 402 `credits_exhausted`.
 * @param {{ credits: unknown, balance: number } | null | undefined} credits
 */
export function outOfCredits(credits) {
  return Boolean(credits?.credits) && (credits?.balance ?? 0) < 1;
}

/**
 * Minutes of the current hour gone, at least one: this hour's counts over it are a rate per minute.
 * @param {number} now epoch ms
 */
export function minutesIntoHour(now) {
  return Math.max(1, (now % 3_600_000) / 60_000);
}

/**
 * How wide each of `count` bars of an hour is, in CSS pixels and in seconds, for an hour
 * `hourPx` wide (or of a step `stepSeconds` long, a day say): together 80 % of it, each at least
 * `minPx`, so a week of hours on a phone still shows every bar.
 * @param {number} hourPx
 * @param {number} count
 * @param {number} minPx
 * @param {number} [stepSeconds]
 */
export function barWidth(hourPx, count, minPx, stepSeconds = 3600) {
  const px = Math.max(minPx, (0.8 * hourPx) / count);
  return { px, seconds: (px * stepSeconds) / hourPx };
}

/**
 * Where the `index`-th of `count` bars of each hour starts (epoch seconds): side by side,
 * centred on the hour's tick, so a third series is one more bar beside the others.
 * @param {readonly number[]} hours epoch seconds
 * @param {number} index
 * @param {number} count
 * @param {number} seconds one bar's width
 */
export function barStarts(hours, index, count, seconds) {
  return hours.map((x) => x + (index - count / 2) * seconds);
}

/**
 * The date an instant falls on in a time zone, as `2026-11-26`: a customer's day starts at its
 * local midnight, so its UTC instant alone would name the day before for a zone east of UTC.
 * @param {string} iso
 * @param {string} timeZone IANA
 */
export function localDate(iso, timeZone) {
  // en-CA writes dates as ISO does: year-month-day.
  return new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(
    new Date(iso),
  );
}

/**
 * A customer's period as its own calendar names it: `2026-11-15 to 2026-12-14`, its first day and
 * its last (the end is the next period's midnight, which is no day of this one).
 * @param {string} start
 * @param {string} end
 * @param {string} timeZone IANA
 */
export function periodText(start, end, timeZone) {
  return `${localDate(start, timeZone)} to ${localDate(new Date(Date.parse(end) - 1).toISOString(), timeZone)}`;
}
