// @ts-check
// The operators' console: a page over the admin API. The admin token lives in this tab's session
// storage only (gone when the tab closes; never in a URL, a cookie or a log); every action is an
// admin API call, so it is audited like any other.

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { UsageChart } from './charts.js';
import { CustomerPage, Customers } from './customers.js';
import { minutesIntoHour, refusedPercent, requestsOf } from './figures.js';
import { KeyPage, Keys } from './keys.js';
import { Leaks } from './leaks.js';
import { api, Card, DataTable, ErrorNote, html, TOKEN, usePolled, useZones, whenIn } from './ui.js';
import { WebhookPage, Webhooks } from './webhooks.js';

/** The page's hash route, followed as it changes. */
function useRoute() {
  const [route, setRoute] = useState(location.hash || '#/overview');
  useEffect(() => {
    const onHash = () => setRoute(location.hash || '#/overview');
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  return route;
}

function SignIn({ onSignedIn }) {
  const [error, setError] = useState(/** @type {Error | null} */ (null));
  const submit = async (event) => {
    event.preventDefault();
    const token = /** @type {string} */ (new FormData(event.currentTarget).get('token'));
    sessionStorage.setItem(TOKEN, token);
    try {
      await api('GET', '/admin/plans');
      onSignedIn();
    } catch (err) {
      sessionStorage.removeItem(TOKEN);
      const failed = /** @type {import('./ui.js').ApiError} */ (err);
      setError(failed.status === 401 ? new Error('That admin token is not valid.') : failed);
    }
  };
  return html`<main class="signin">
    <h1>Animal store API console</h1>
    <form onSubmit=${submit}>
      <label for="token">Admin token (ADMIN_TOKEN)</label>
      <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
      <${ErrorNote} error=${error} />
      <button type="submit" class="primary">Sign in</button>
    </form>
    <p class="hint">The token stays in this tab until you sign out or close it.</p>
  </main>`;
}

/** Bans the overview lists by name, those ending first; the card counts them all. */
const BANS_LISTED = 20;

function Overview() {
  const [top, error] = usePolled(
    () => /** @type {Promise<import('./types.js').Top>} */ (api('GET', '/admin/usage?window=24h&limit=10')),
    15_000,
    [],
  );
  // Every ban in force, counted by the limiter's own index of them: whole however many keys there are.
  const [bans, bansError] = usePolled(
    () => /** @type {Promise<import('./types.js').BanList>} */ (api('GET', `/admin/bans?limit=${BANS_LISTED}`)),
    15_000,
    [],
  );
  // Requests per minute by plan: the last hour's counts, moving as the polls go.
  const [hourly] = usePolled(
    () => /** @type {Promise<import('./types.js').Top>} */ (api('GET', '/admin/usage?window=1h&limit=1')),
    10_000,
    [],
  );
  // Each ban's end on its customer's clock (UTC for a key of no customer).
  const zoneOf = useZones((bans?.items ?? []).map((b) => b.customerId));
  const minutes = minutesIntoHour(Date.now());
  const totals = top?.totals;
  const requests = requestsOf(totals);
  const refused = refusedPercent(totals);
  return html`<section aria-labelledby="overview-title">
    <h1 id="overview-title">Overview</h1>
    <${ErrorNote} error=${error} />
    <div class="cards">
      <${Card}><span class="label">Requests, 24 h</span><span class="value" data-testid="total-requests">${requests ?? '…'}</span>
        ${
          totals
            ? html`<span class="detail"
                ><span data-testid="total-admitted">${totals.admitted}</span> admitted, <span data-testid="total-refused"
                  >${totals.refused}</span
                > refused (429), <span data-testid="total-out-of-credits">${totals.outOfCredits}</span> out of credits
                (402)${totals.forbidden > 0 ? `, ${totals.forbidden} forbidden (403)` : ''}</span
              >`
            : null
        }
      <//>
      <${Card}><span class="label">Refused (429), 24 h</span><span class="value" data-testid="refused-429">${totals?.refused ?? '…'}</span>
        ${refused !== null ? html`<span class="detail">${refused} % of requests, by a limit or a ban</span>` : null}
      <//>
      <${Card}><span class="label">Out of credits (402), 24 h</span><span class="value" data-testid="out-of-credits-402">${totals?.outOfCredits ?? '…'}</span>
        <span class="detail">refused credits_exhausted: a top-up brings them back</span>
      <//>
      <${Card}><span class="label">Banned now</span><span class="value" data-testid="banned-now">${bans?.count ?? '…'}</span><//>
      <${Card}><span class="label">Active keys, 24 h</span><span class="value" data-testid="active-keys">${totals?.keys ?? '…'}</span><//>
      <${Card}><span class="label">Active customers, 24 h</span><span class="value" data-testid="active-customers">${totals?.customers ?? '…'}</span>
      <//>
    </div>
    <${ErrorNote} error=${bansError} />
    ${
      bans && bans.count > 0
        ? html`<h2>Banned now</h2>
            <p class="hint">Banned for sending on after their 429s, without waiting the Retry-After; each key's page lifts its ban.</p>
            <${DataTable} label="Banned now" testid="banned-keys" columns=${['key', 'name', 'customer', 'banned until']}
              rows=${bans.items.map((b) => [
                html`<a href=${`#/keys/${b.id}`}>${b.id}</a>`,
                b.name,
                b.customerId ? html`<a href=${`#/customers/${b.customerId}`}>${b.customerId}</a>` : '—',
                whenIn(b.bannedUntil, zoneOf(b.customerId)),
              ])} />
            ${bans.count > bans.items.length ? html`<p class="count">and ${bans.count - bans.items.length} more, ending later</p>` : null}`
        : null
    }
    <h2>Requests per minute by plan (this hour)</h2>
    <${DataTable} label="Requests per minute by plan" testid="plans-per-minute"
      columns=${['plan', 'admitted per minute', 'refused (429) per minute', 'out of credits (402) per minute', 'keys']}
      rows=${(hourly?.plans ?? []).map((p) => [
        p.plan,
        (p.admitted / minutes).toFixed(1),
        (p.refused / minutes).toFixed(1),
        (p.outOfCredits / minutes).toFixed(1),
        p.keys,
      ])} />
    ${top ? html`<${UsageChart} title="All keys, per hour, last 24 h" rows=${top.hours} />` : null}
    <h2>Top customers, 24 h</h2>
    ${
      top && top.customers.length === 0
        ? html`<p class="count">No customer's keys had requests in the last 24 h.</p>`
        : html`<${DataTable} label="Top customers" testid="top-customers" columns=${['customer', 'name', 'plan', 'admitted', 'refused (429)', 'out of credits (402)']}
            rows=${(top?.customers ?? []).map((c) => [html`<a href=${`#/customers/${c.id}`}>${c.id}</a>`, c.name, c.plan, c.admitted, c.refused, c.outOfCredits])} />`
    }
    <h2>Top keys, 24 h</h2>
    <${DataTable} label="Top keys" testid="top-keys" columns=${['key', 'name', 'plan', 'admitted', 'refused (429)', 'out of credits (402)']}
      rows=${(top?.keys ?? []).map((k) => [html`<a href=${`#/keys/${k.id}`}>${k.id}</a>`, k.name, k.plan, k.admitted, k.refused, k.outOfCredits])} />
  </section>`;
}
/** Each list page's item page, by the route's first part. */
const ITEM_PAGES = { keys: KeyPage, customers: CustomerPage, webhooks: WebhookPage };

/**
 * The page for a hash route: #/overview, #/keys, #/keys/<id>, #/customers, #/customers/<id>,
 * #/webhooks, #/webhooks/<id>, #/leaks.
 */
function pageFor(route) {
  const item = /^#\/(keys|customers|webhooks)\/(.+)$/.exec(route);
  if (item) return html`<${ITEM_PAGES[item[1]]} id=${decodeURIComponent(item[2])} />`;
  if (route.startsWith('#/keys')) return html`<${Keys} />`;
  if (route.startsWith('#/customers')) return html`<${Customers} />`;
  if (route.startsWith('#/webhooks')) return html`<${Webhooks} />`;
  if (route.startsWith('#/leaks')) return html`<${Leaks} />`;
  return html`<${Overview} />`;
}

function App() {
  const [signedIn, setSignedIn] = useState(() => sessionStorage.getItem(TOKEN) !== null);
  const route = useRoute();
  if (!signedIn) return html`<${SignIn} onSignedIn=${() => setSignedIn(true)} />`;
  const signOut = () => {
    sessionStorage.removeItem(TOKEN);
    setSignedIn(false);
    location.hash = '';
  };
  const page = pageFor(route);
  const current = (hash) => (route.startsWith(hash) ? 'page' : undefined);
  return html`<header>
      <a class="brand" href="#/overview">Animal store API</a>
      <nav aria-label="Console">
        <a href="#/overview" aria-current=${current('#/overview')}>Overview</a>
        <a href="#/customers" aria-current=${current('#/customers')}>Customers</a>
        <a href="#/keys" aria-current=${current('#/keys')}>Keys</a>
        <a href="#/webhooks" aria-current=${current('#/webhooks')}>Webhooks</a>
        <a href="#/leaks" aria-current=${current('#/leaks')}>Leaks</a>
      </nav>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main>${page}</main>`;
}

const root = /** @type {HTMLElement} */ (document.getElementById('app'));
// The static "Loading" line goes: preact appends to what it did not render itself.
root.textContent = '';
render(html`<${App} />`, root);
