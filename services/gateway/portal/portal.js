// The customers' portal: plain DOM, no framework, no inline script. Every change carries the
// session's CSRF token; the session itself is an HttpOnly cookie this script never sees.

import { showInvoice } from './invoice.js';

/** @type {{ customer: { id: string, name: string, plan: string, billing: { timeZone: string } }, csrfToken: string, maxKeys: number, scopes: string[], grace: { defaultSeconds: number, maxSeconds: number } } | null} */
let session = null;

const byId = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** An element with attributes and children (text or elements). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === undefined || value === null) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) el.append(child);
  return el;
}

function status(text, isError = false) {
  const el = byId('status');
  el.textContent = text;
  el.className = isError ? 'error' : '';
  el.hidden = text === '';
}

/** Calls the portal API; a 401 means the session is over. */
async function api(method, url, body) {
  const headers = { accept: 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = session?.csrfToken ?? '';
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    signedOut('Your session has ended. Ask for a new sign-in link where you came from.');
    throw new Error('signed out');
  }
  const data = res.status === 204 ? null : await res.json();
  if (!res.ok) throw new Error(data?.message ?? `The portal answered ${res.status}`);
  return data;
}

function signedOut(text) {
  session = null;
  for (const id of ['nav', 'sign-out', 'usage', 'history', 'keys', 'invoice']) byId(id).hidden = true;
  status(text);
}

/** The customer's billing zone: every time on these pages is on its clock, and says so. */
const zone = () => session?.customer.billing.timeZone ?? 'UTC';

/** An instant on the customer's clock, the zone named; a day of its calendar (its column names the zone). */
const when = (iso, dateOnly = false) =>
  iso
    ? `${new Date(iso).toLocaleString('en-GB', { timeZone: zone(), dateStyle: 'medium', ...(dateOnly ? {} : { timeStyle: 'short' }) })}${dateOnly ? '' : ` ${zone()}`}`
    : '—';

/** Where a customer asks for what the portal does not do itself (a top-up, a ban lifted early). */
const ASK = 'ask the team that runs this API, who sent you the link to this portal';

/** What a banned key is told: until when, why, and what ends it. */
function banNotice(key) {
  return h(
    'div',
    { class: 'notice', role: 'status', 'data-ban': key.id },
    h('p', {}, h('strong', {}, `Banned until ${when(key.bannedUntil)}.`)),
    h(
      'p',
      {},
      'Its clients kept sending requests after being answered 429 Too Many Requests, without waiting the ',
      h('code', {}, 'Retry-After'),
      ' each answer gave, so every request with this key is refused 429 ',
      h('code', {}, 'api_key_banned'),
      ' until then.',
    ),
    h(
      'p',
      {},
      `The ban ends by itself. Have your clients wait the Retry-After of each 429 so it does not happen again; to have it lifted sooner, ${ASK}.`,
    ),
  );
}
const number = (n) => n.toLocaleString('en-US');

/** One window now: its heading, a bar and the numbers, the bar labelled by the heading. */
function quota(level, id, title, w) {
  return [
    h(level, { id }, title),
    h('progress', { max: w.limit, value: w.used, 'aria-labelledby': id }),
    h('p', {}, `${number(w.used)} of ${number(w.limit)} used, ${number(w.remaining)} left; resets ${when(w.resetAt)}.`),
  ];
}

async function showUsage() {
  const [usage, keys] = await Promise.all([api('GET', '/portal/api/usage'), api('GET', '/portal/api/keys')]);
  byId('usage-bans').replaceChildren(
    ...keys.items
      .filter((k) => k.bannedUntil)
      .map((k) =>
        h(
          'p',
          { class: 'notice', role: 'status' },
          `Key “${k.name}” is banned until ${when(k.bannedUntil)} for sending on after its 429s: `,
          h('a', { href: '#keys' }, 'Keys'),
          ' says why and what to do.',
        ),
      ),
  );
  const period = usage.billingPeriod;
  byId('usage-period').textContent =
    `${number(period.units)} units billed this billing period (${when(period.start)} to ${when(period.end)}).`;
  const windows = Object.entries(usage.windows);
  byId('usage-windows').replaceChildren(
    ...(windows.length === 0
      ? [h('p', {}, 'Your plan has no shared quotas: each key has its own.')]
      : windows.map(([name, w]) => h('div', { class: 'card' }, ...quota('h2', `quota-${name}`, `Per ${name}`, w)))),
  );
  // A key with limits of its own counts against them as well as against the shared ones.
  byId('usage-keys').replaceChildren(
    ...(usage.keys.length === 0
      ? []
      : [
          h('h2', {}, 'Your keys’ own limits'),
          ...usage.keys.map((key) =>
            h(
              'div',
              { class: 'card', 'data-key-quota': key.id },
              h('h3', {}, `Key “${key.name}”`),
              ...Object.entries(key.windows).flatMap(([name, w]) =>
                quota('h4', `quota-${key.id}-${name}`, `Per ${name}`, w),
              ),
            ),
          ),
        ]),
  );
  await showCredits(usage.credits);
}

/** What a ledger entry was, in the customer's words. */
const ENTRY_KINDS = {
  topup: 'Top-up',
  grant: 'Credits given',
  adjustment: 'Correction',
  refill: 'Refill',
  spend: 'Requests',
  refund: 'Refund',
};

function entryRow(entry) {
  const detail =
    entry.type === 'spend'
      ? `Requests from ${when(entry.at)} to ${when(entry.end)}`
      : entry.type === 'refund'
        ? `Requests not served from ${when(entry.at)} to ${when(entry.end)}`
        : entry.type === 'refill'
          ? `For the ${entry.period?.startsWith('day:') ? 'day' : 'billing period'}`
          : (entry.reason ?? '');
  return h(
    'tr',
    {},
    h('td', {}, when(entry.at)),
    h('td', {}, ENTRY_KINDS[entry.type] ?? entry.type),
    h('td', { class: 'num' }, `${entry.amount > 0 ? '+' : ''}${number(entry.amount)}`),
    h('td', {}, detail),
  );
}

/** The ledger's next page (newest first), appended to its table; the button stays while there is more. */
async function moreLedger(after) {
  const query = new URLSearchParams({ limit: '10' });
  if (after) query.set('after', after);
  const page = await api('GET', `/portal/api/credits/ledger?${query}`);
  const body = /** @type {HTMLElement} */ (document.querySelector('#credits tbody'));
  if (!after) body.replaceChildren();
  body.append(...page.items.map(entryRow));
  byId('credits-empty').hidden = body.childElementCount > 0;
  const more = byId('credits-more');
  more.hidden = page.next === null;
  more.onclick = () => run(() => moreLedger(page.next));
}

/** The customer's credits, when it has credit terms: the balance, the next refill, the ledger. */
async function showCredits(credits) {
  const place = byId('credits');
  place.hidden = !credits;
  if (!credits) return place.replaceChildren();
  const refill = credits.refill
    ? `Next refill ${when(credits.nextRefillAt)}: back up to ${number(credits.refill.amount)} if it is lower then.`
    : 'No automatic refill: the balance changes only by your requests and by top-ups.';
  // The cheapest request costs a credit: below one, every request is refused 402.
  const out = credits.balance < 1;
  place.replaceChildren(
    h('h2', { id: 'credits-title' }, 'Credits'),
    out
      ? h(
          'div',
          { class: 'notice', role: 'status', id: 'out-of-credits' },
          h('p', {}, h('strong', {}, 'You are out of credits.')),
          h(
            'p',
            {},
            'Every request with your keys is refused 402 Payment Required (',
            h('code', {}, 'credits_exhausted'),
            credits.nextRefillAt && credits.refill
              ? `) until the refill at ${when(credits.nextRefillAt)} brings the balance back up to ${number(credits.refill.amount)}.`
              : '), and nothing refills the balance by itself.',
          ),
          h('p', {}, `Credits are topped up for you, not on this page: for a top-up, ${ASK}.`),
        )
      : null,
    h(
      'div',
      { class: 'card' },
      h('p', { class: 'balance' }, `${number(credits.balance)} credits left`),
      h('p', {}, refill),
      credits.openHour
        ? h('p', { class: 'muted' }, `${number(credits.openHour.spent)} spent this hour, listed once it ends.`)
        : null,
    ),
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        {},
        h('caption', { class: 'muted' }, 'Credit history, newest first'),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, 'When'),
            h('th', { scope: 'col' }, 'What'),
            h('th', { scope: 'col', class: 'num' }, 'Credits'),
            h('th', { scope: 'col' }, 'Details'),
          ),
        ),
        h('tbody', {}),
      ),
    ),
    h('p', { id: 'credits-empty', class: 'muted', hidden: true }, 'Nothing yet.'),
    h('button', { type: 'button', id: 'credits-more', class: 'secondary', hidden: true }, 'Older entries'),
  );
  await moreLedger(null);
}

async function showHistory(event) {
  event?.preventDefault();
  const form = /** @type {HTMLFormElement} */ (byId('history-form'));
  const data = new FormData(form);
  const query = new URLSearchParams({ granularity: String(data.get('granularity')) });
  if (data.get('keyId')) query.set('keyId', String(data.get('keyId')));
  const history = await api('GET', `/portal/api/usage/history?${query}`);
  const most = Math.max(1, ...history.series.map((s) => s.units));
  byId('history-table').replaceChildren(
    h(
      'p',
      {},
      `${number(history.totals.units)} units, ${number(history.totals.refused)} refused (429), ${number(history.totals.outOfCredits)} out of credits (402), from ${when(history.from)} to ${when(history.to)}.`,
    ),
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        {},
        h('caption', { class: 'muted' }, 'Units billed per step'),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, `From (${zone()})`),
            h('th', { scope: 'col', class: 'num' }, 'Units'),
            h('th', { scope: 'col', class: 'num' }, 'Refused (429)'),
            h('th', { scope: 'col', class: 'num' }, 'Out of credits (402)'),
            h('th', { scope: 'col' }, 'Share'),
          ),
        ),
        h(
          'tbody',
          {},
          history.series.map((s) =>
            h(
              'tr',
              {},
              h('td', {}, when(s.start, history.granularity !== 'hour')),
              h('td', { class: 'num' }, number(s.units)),
              h('td', { class: 'num' }, number(s.refused)),
              h('td', { class: 'num' }, number(s.outOfCredits)),
              h('td', {}, h('meter', { min: 0, max: most, value: s.units, 'aria-label': `${s.units} units` })),
            ),
          ),
        ),
      ),
    ),
  );
}

function showSecret(text, key) {
  byId('new-secret').replaceChildren(
    h(
      'div',
      { class: 'card secret' },
      h('p', {}, text),
      h('output', { 'aria-label': 'The key' }, key),
      h('p', { class: 'muted' }, 'It is shown this once: copy it now.'),
    ),
  );
}

/** A key from the operator's API_KEYS_FILE: shown and counted, changed only in that file. */
function fileKeyCard(key) {
  return h(
    'div',
    { class: 'card', 'data-key': key.id, 'data-source': 'file' },
    h('h2', {}, key.name),
    h(
      'p',
      { class: 'muted' },
      `${key.id} · scopes ${key.scopes.join(', ') || 'none'} · created ${when(key.createdAt)}`,
    ),
    h('p', {}, 'Managed in a file by your provider: read-only here; ask them to rotate, change or revoke it.'),
  );
}

function keyCard(key) {
  if (key.source === 'file') return fileKeyCard(key);
  const grace = h('input', {
    type: 'number',
    min: 0,
    max: session?.grace.maxSeconds,
    value: session?.grace.defaultSeconds,
    name: 'grace',
  });
  const scopeBoxes = (session?.scopes ?? []).map((scope) =>
    h(
      'label',
      {},
      h('input', { type: 'checkbox', name: 'scope', value: scope, checked: key.scopes.includes(scope) }),
      ` ${scope}`,
    ),
  );
  const cidrs = h('input', {
    name: 'cidrs',
    value: (key.allowedCidrs ?? []).join(', '),
    placeholder: 'any address',
    autocomplete: 'off',
  });
  const revoke = h('button', { type: 'button', class: 'danger', onclick: () => revokeKey(key, revoke) }, 'Revoke');
  return h(
    'div',
    { class: 'card', 'data-key': key.id },
    h('h2', {}, key.name),
    h(
      'p',
      { class: 'muted' },
      `${key.id} · starts ${key.prefix ?? '—'}… · created ${when(key.createdAt)}`,
      key.previousKeyExpiresAt ? ` · previous secret works until ${when(key.previousKeyExpiresAt)}` : '',
    ),
    key.bannedUntil ? banNotice(key) : null,
    h(
      'p',
      { class: 'muted', 'data-key-windows': key.id },
      'Its rate limits are your account’s: every request with it counts toward the windows all your keys share, and toward its own if it has limits of its own (',
      h('a', { href: '#usage' }, 'Usage now'),
      ' shows them).',
    ),
    h(
      'form',
      { class: 'row', onsubmit: (e) => narrowKey(e, key, scopeBoxes, cidrs) },
      h('fieldset', {}, h('legend', {}, 'Scopes'), scopeBoxes),
      h('label', {}, 'Allowed addresses (CIDRs, comma-separated)', cidrs),
      h('button', { type: 'submit', class: 'secondary' }, 'Save'),
    ),
    h(
      'div',
      { class: 'actions' },
      h('label', {}, 'Grace (seconds) ', grace),
      h('button', { type: 'button', onclick: () => rotateKey(key, grace) }, 'Rotate'),
      revoke,
    ),
  );
}

async function showKeys() {
  const { items } = await api('GET', '/portal/api/keys');
  byId('keys-room').textContent = `${items.length} of ${session?.maxKeys} keys your plan allows.`;
  byId('keys-list').replaceChildren(...items.map(keyCard));
  const select = /** @type {HTMLSelectElement} */ (document.querySelector('#history-form select[name=keyId]'));
  select.replaceChildren(
    h('option', { value: '' }, 'All your keys'),
    ...items.map((k) => h('option', { value: k.id }, k.name)),
  );
}

/**
 * Redraws the key list, then says what was done: a change is announced once the list shows it, so
 * an edit made after the announcement is not redrawn away. The announcement (a secret shown once
 * among them) comes even if the redraw fails.
 */
async function settled(announce) {
  try {
    await showKeys();
  } finally {
    announce();
  }
}

async function run(action) {
  try {
    await action();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (message !== 'signed out') status(message, true);
  }
}

function createKey(event) {
  event.preventDefault();
  const form = /** @type {HTMLFormElement} */ (event.target);
  run(async () => {
    const made = await api('POST', '/portal/api/keys', { name: String(new FormData(form).get('name')) });
    form.reset();
    status('');
    await settled(() => showSecret(`Key “${made.name}” created.`, made.key));
  });
}

function rotateKey(key, grace) {
  run(async () => {
    const rotated = await api('POST', `/portal/api/keys/${encodeURIComponent(key.id)}/rotate`, {
      gracePeriodSeconds: Number(grace.value),
    });
    status('');
    await settled(() =>
      showSecret(
        `Key “${key.name}” rotated; the old secret works until ${when(rotated.previousKeyExpiresAt)}.`,
        rotated.key,
      ),
    );
  });
}

function revokeKey(key, button) {
  if (button.dataset.confirm !== 'yes') {
    button.dataset.confirm = 'yes';
    button.textContent = 'Confirm: revoke for good';
    return;
  }
  run(async () => {
    await api('DELETE', `/portal/api/keys/${encodeURIComponent(key.id)}`);
    await settled(() => status(`Key “${key.name}” revoked.`));
  });
}

function narrowKey(event, key, scopeBoxes, cidrs) {
  event.preventDefault();
  const scopes = scopeBoxes
    .map((l) => l.querySelector('input'))
    .filter((i) => i.checked)
    .map((i) => i.value);
  const list = cidrs.value
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  run(async () => {
    await api('PATCH', `/portal/api/keys/${encodeURIComponent(key.id)}`, {
      scopes,
      allowedCidrs: list.length ? list : null,
    });
    await settled(() => status(`Key “${key.name}” saved.`));
  });
}

const invoice = () => showInvoice(api, h, session?.customer.billing.timeZone ?? 'UTC');
const PAGES = { usage: showUsage, history: showHistory, keys: showKeys, invoice };

function route() {
  if (!session) return;
  const page = location.hash.slice(1) in PAGES ? location.hash.slice(1) : 'usage';
  for (const name of Object.keys(PAGES)) byId(name).hidden = name !== page;
  status('');
  for (const link of document.querySelectorAll('#nav a')) {
    if (link.getAttribute('href') === `#${page}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${byId(`${page}-title`).textContent} · ${session.customer.name}`;
  run(() => PAGES[page]());
}

async function start() {
  try {
    session = await api('GET', '/portal/api/session');
  } catch {
    return;
  }
  status('');
  byId('nav').hidden = false;
  byId('sign-out').hidden = false;
  byId('history-form').addEventListener('submit', (e) => run(() => showHistory(e)));
  byId('create-form').addEventListener('submit', createKey);
  byId('invoice-form').addEventListener('change', () => run(invoice));
  byId('invoice-form').addEventListener('submit', (e) => e.preventDefault());
  byId('sign-out').addEventListener('click', () =>
    run(async () => {
      await api('POST', '/portal/api/sign-out');
      signedOut('You have signed out.');
    }),
  );
  window.addEventListener('hashchange', route);
  route();
  if (location.hash.slice(1) !== 'keys') run(showKeys);
}

start();
