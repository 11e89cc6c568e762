import type { ApiDocumentConfig } from '../config.js';
import type { BanPolicy } from '../limits/key-limiter.js';
import { DEFAULT_PLANS, LIMIT_FIELDS, type PlanBook, WINDOW_NAMES } from '../plans/plans.js';

/*
 * What the public document says in words: where it is served, who answers for it, and the
 * reference page's text with the plans and the ban rule in force.
 */

/** What the public document says beyond the pets service's own: where, from whom, which ban rule. */
export interface PublicDocumentOptions {
  servers: { url: string; description: string }[];
  contact: { name: string; email?: string; url?: string };
  license: { name: string; url?: string; identifier?: string };
  ban: BanPolicy;
  /** The plans in force, for the reference page's table. */
  plans: PlanBook;
}

/** The gateway's own /v1, relative: the document then describes whichever gateway served it. */
export const OWN_BASE = '/v1';

export function publicDocumentOptions(config: {
  apiDocument: ApiDocumentConfig;
  ban: BanPolicy;
  plans: PlanBook;
}): PublicDocumentOptions {
  const { productionUrl, stagingUrl, contact, license } = config.apiDocument;
  const servers = [
    productionUrl
      ? { url: productionUrl, description: 'Production' }
      : { url: OWN_BASE, description: 'The gateway that served this document' },
  ];
  if (stagingUrl) servers.push({ url: stagingUrl, description: 'Staging' });
  return { servers, contact, license, ban: config.ban, plans: config.plans };
}

/** The defaults of every setting: what `npm start` and the lint gate publish. */
export const DEFAULT_DOCUMENT_OPTIONS: PublicDocumentOptions = {
  servers: [{ url: OWN_BASE, description: 'The gateway that served this document' }],
  contact: { name: 'Animal store API support' },
  license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
  ban: { threshold: 50, windowMs: 60_000, durationMs: 900_000, graceMs: 500, minRetryAfterMs: 8_000 },
  plans: DEFAULT_PLANS,
};

function duration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  const plural = (n: number, unit: string) => `${n.toLocaleString('en-US')} ${unit}${n === 1 ? '' : 's'}`;
  return seconds % 60 === 0 ? plural(seconds / 60, 'minute') : plural(seconds, 'second');
}

/** The ban rule, in the words the reference page uses, with the numbers in force. */
export function banRule(ban: BanPolicy): string {
  const n = ban.threshold.toLocaleString('en-US');
  const shortest =
    ban.minRetryAfterMs > 0 ? ` A 429's \`Retry-After\` is at least ${duration(ban.minRetryAfterMs)}.` : '';
  return (
    `A refused request counts toward a ban until its \`Retry-After\` has passed (for at most ` +
    `${duration(ban.windowMs)}): more than ${n} counting at once ban the key for ${duration(ban.durationMs)} ` +
    `(429 \`api_key_banned\`). Up to ${n} clients sharing a key are never banned while each waits out the ` +
    `\`Retry-After\` of its last 429.${shortest}`
  );
}

export function describeApi(options: PublicDocumentOptions): string {
  const production = options.servers[0]?.url ?? OWN_BASE;
  const documentUrl = `${production}/openapi.json`;
  return [
    'List, add and read the animals of the store, through the API gateway.',
    '',
    'Every operation needs an API key sent as a bearer token: `Authorization: Bearer <API_KEY>`. ' +
      `Paths are relative to the base address, which ends in \`/v1\`: \`GET /pets\` is \`GET ${production}/pets\`.`,
    '',
    `This reference as an OpenAPI 3.1 document: [${documentUrl}](${documentUrl}).`,
    '',
    '`GET /pets/{petId}` is deprecated and will be removed on 5 December 2030: use `GET /pets` with its ' +
      'filters (`status`, or `id` for given animals) instead.',
    '',
    '## Plans and rate limits',
    '',
    ...planTable(options.plans),
    '',
    "A second, minute or hour window starts with the key's first admitted request (a fixed window), or " +
      'counts the last second, minute or hour at any moment (a sliding window: no span of that length ever ' +
      'admits more than the limit); day and month windows are calendar quotas. A key of a customer counts ' +
      "them in its customer's billing calendar: its day from midnight in the customer's time zone (an IANA " +
      "name such as `Asia/Kolkata`), its month from the customer's anchor day (1–28) at that midnight; a key " +
      'of no customer counts the UTC day and the month from the 1st at 00:00 UTC. `GET /v1/usage` answers a ' +
      "key's zone and when its day and month next reset (`key.calendar`). Only admitted requests count, " +
      'each taking its cost from every window. A key ' +
      'without the scope a request needs gets 403 `insufficient_scope`, and a key used from outside the ' +
      'addresses it allows gets 403 `ip_not_allowed`; neither costs anything. Every response carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` ' +
      'and `X-RateLimit-Reset` for the binding window (the one with the fewest requests remaining), and the ' +
      'IETF draft fields `RateLimit` and `RateLimit-Policy` for every window. Above a limit the answer is ' +
      '429 with `Retry-After`: wait that long and back off exponentially. Requests without a valid key are ' +
      'limited per client address, and so are `GET /v1`, this document and the reference at `/docs`, with or ' +
      'without a key.',
    '',
    `**Bans.** ${banRule(options.ban)}`,
    '',
    'Every error body is `{ "code", "message", "status" }` (the `Error` schema); each error response lists ' +
      'the codes it can carry. Response objects may gain fields: ignore the ones you do not know.',
  ].join('\n');
}

/** The plans in force as the reference page's table: a column per window any plan has. */
function planTable(book: PlanBook): string[] {
  const n = (value: number) => value.toLocaleString('en-US');
  const windows = WINDOW_NAMES.filter((w) => [...book.plans.values()].some((p) => p.windows?.[LIMIT_FIELDS[w]]));
  const title = (text: string) => `${text[0]?.toUpperCase()}${text.slice(1)}`;
  const notes = [...book.plans.values()].map((plan) =>
    [
      plan.algorithm === 'sliding' ? 'sliding' : '',
      plan.scopes.length < 2 ? `only ${plan.scopes.join(', ')}` : '',
      book.shadow || plan.shadow ? 'not enforced (shadow)' : '',
    ]
      .filter(Boolean)
      .join('; '),
  );
  // The spec's own table when no plan has anything to note.
  const noted = notes.some(Boolean);
  const rows = [...book.plans].map(([name, plan], i) => {
    const cells = windows.map((w) => {
      const limit = plan.windows?.[LIMIT_FIELDS[w]];
      return plan.windows ? (limit === undefined ? '–' : n(limit)) : 'agreed per key';
    });
    if (noted) cells.push(notes[i] || '–');
    return `| ${title(name)} | ${cells.join(' | ')} |`;
  });
  const costs = [...book.routeCosts].map(([route, cost]) => `\`${route}\` costs ${cost}`);
  return [
    `| Plan | ${windows.map((w) => `Requests per ${w}`).join(' | ')} |${noted ? ' Notes |' : ''}`,
    `| --- | ${windows.map(() => '---').join(' | ')} |${noted ? ' --- |' : ''}`,
    ...rows,
    ...(costs.length > 0 ? ['', `Each request costs 1 from every window, except: ${costs.join(', ')}.`] : []),
  ];
}
