// @ts-check
// Usage now: the keys' bans, this billing period's units, the shared windows, each key's own
// windows and, for a customer with credit terms, its credits and their ledger. Each a component.

import { Card, DataTable, Notice } from '@shared/components.js';
import { count } from '@shared/format.js';
import { html } from '@shared/html.js';
import { useEffect, useState } from 'preact/hooks';
import { ASK, api, when } from './account.js';

/** One window now: its heading, a bar and the numbers, the bar labelled by the heading. */
function Quota({ level, id, title, w }) {
  const heading = level === 'h2' ? html`<h2 id=${id}>${title}</h2>` : html`<h4 id=${id}>${title}</h4>`;
  return html`${heading}<progress max=${w.limit} value=${w.used} aria-labelledby=${id}></progress>
    <p>${`${count(w.used)} of ${count(w.limit)} used, ${count(w.remaining)} left; resets ${when(w.resetAt)}.`}</p>`;
}

/** Each banned key, in a line pointing to the Keys page, which says why and what to do. */
function BanLines({ keys }) {
  return html`<div id="usage-bans">${keys
    .filter((k) => k.bannedUntil)
    .map(
      (k) =>
        html`<${Notice}><p>${`Key “${k.name}” is banned until ${when(k.bannedUntil)} for sending on after its 429s: `}<a href="#keys">Keys</a>${' says why and what to do.'}</p><//>`,
    )}</div>`;
}

function SharedWindows({ windows }) {
  const list = Object.entries(windows);
  return html`<div id="usage-windows">${
    list.length === 0
      ? html`<p>Your plan has no shared quotas: each key has its own.</p>`
      : list.map(
          ([name, w]) => html`<${Card}><${Quota} level="h2" id=${`quota-${name}`} title=${`Per ${name}`} w=${w} /><//>`,
        )
  }</div>`;
}

/** Each key with limits of its own: it counts against them as well as against the shared ones. */
function KeyWindows({ keys }) {
  return html`<div id="usage-keys">${
    keys.length === 0
      ? null
      : html`<h2>Your keys’ own limits</h2>${keys.map(
          (key) => html`<${Card} data-key-quota=${key.id}>
            <h3>${`Key “${key.name}”`}</h3>
            ${Object.entries(key.windows).map(
              ([name, w]) =>
                html`<${Quota} level="h4" id=${`quota-${key.id}-${name}`} title=${`Per ${name}`} w=${w} />`,
            )}
          <//>`,
        )}`
  }</div>`;
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

function entryCells(entry) {
  const detail =
    entry.type === 'spend'
      ? `Requests from ${when(entry.at)} to ${when(entry.end)}`
      : entry.type === 'refund'
        ? `Requests not served from ${when(entry.at)} to ${when(entry.end)}`
        : entry.type === 'refill'
          ? `For the ${entry.period?.startsWith('day:') ? 'day' : 'billing period'}`
          : (entry.reason ?? '');
  return [
    when(entry.at),
    ENTRY_KINDS[entry.type] ?? entry.type,
    `${entry.amount > 0 ? '+' : ''}${count(entry.amount)}`,
    detail,
  ];
}

/** The cheapest request costs a credit: below one, every request is refused 402. */
function OutOfCredits({ credits }) {
  const until =
    credits.nextRefillAt && credits.refill
      ? `) until the refill at ${when(credits.nextRefillAt)} brings the balance back up to ${count(credits.refill.amount)}.`
      : '), and nothing refills the balance by itself.';
  return html`<${Notice} id="out-of-credits"><p><strong>You are out of credits.</strong></p><p>Every request with your keys is refused 402 Payment Required (<code>credits_exhausted</code>${until}</p><p>${`Credits are topped up for you, not on this page: for a top-up, ${ASK}.`}</p><//>`;
}

/** The customer's credits, when it has credit terms: the balance, the next refill, the ledger a page at a time. */
function Credits({ credits, portal }) {
  const [ledger, setLedger] = useState({
    items: /** @type {any[]} */ ([]),
    next: /** @type {string | null} */ (null),
    read: false,
  });
  /** The ledger's next page (newest first), after the ones shown. */
  const more = (after) =>
    portal.run(async () => {
      const query = new URLSearchParams({ limit: '10' });
      if (after) query.set('after', after);
      const page = await api('GET', `/portal/api/credits/ledger?${query}`);
      setLedger((l) => ({ items: [...(after ? l.items : []), ...page.items], next: page.next, read: true }));
    });
  useEffect(() => {
    more(null);
  }, []);
  const refill = credits.refill
    ? `Next refill ${when(credits.nextRefillAt)}: back up to ${count(credits.refill.amount)} if it is lower then.`
    : 'No automatic refill: the balance changes only by your requests and by top-ups.';
  return html`<section id="credits" aria-labelledby="credits-title">
    <h2 id="credits-title">Credits</h2>
    ${credits.balance < 1 ? html`<${OutOfCredits} credits=${credits} />` : null}
    <${Card}>
      <p class="balance">${`${count(credits.balance)} credits left`}</p>
      <p>${refill}</p>
      ${credits.openHour ? html`<p class="muted">${`${count(credits.openHour.spent)} spent this hour, listed once it ends.`}</p>` : null}
    <//>
    <${DataTable} label="Credit history" caption="Credit history, newest first" reflow=${false}
      columns=${['When', 'What', { label: 'Credits', num: true }, 'Details']} rows=${ledger.items.map(entryCells)} />
    ${ledger.read && ledger.items.length === 0 ? html`<p id="credits-empty" class="muted">Nothing yet.</p>` : null}
    ${ledger.next !== null ? html`<button type="button" id="credits-more" class="secondary" onClick=${() => more(ledger.next)}>Older entries</button>` : null}
  </section>`;
}

/** @param {{ portal: import('./portal.js').Portal }} props */
export function UsagePage({ portal }) {
  const [read, setRead] = useState(/** @type {{ usage: any, keys: any[] } | null} */ (null));
  useEffect(() => {
    portal.run(async () => {
      const [usage, keys] = await Promise.all([api('GET', '/portal/api/usage'), api('GET', '/portal/api/keys')]);
      setRead({ usage, keys: keys.items });
    });
  }, []);
  const period = read?.usage.billingPeriod;
  return html`<section id="usage" aria-labelledby="usage-title">
    <h1 id="usage-title">Usage now</h1>
    ${
      read
        ? html`<p id="usage-period">${`${count(period.units)} units billed this billing period (${when(period.start)} to ${when(period.end)}).`}</p>
          <${BanLines} keys=${read.keys} />
          <${SharedWindows} windows=${read.usage.windows} />
          <${KeyWindows} keys=${read.usage.keys} />
          ${read.usage.credits ? html`<${Credits} credits=${read.usage.credits} portal=${portal} />` : null}`
        : null
    }
  </section>`;
}
