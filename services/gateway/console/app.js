// @ts-check
// The operators' console: a page over the admin API. The admin token lives in this tab's session
// storage only (gone when the tab closes; never in a URL, a cookie or a log); every action is an
// admin API call, so it is audited like any other.

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { HourlyChart } from './charts.js';
import { CustomerPage, Customers } from './customers.js';
import { minutesIntoHour, refusedPercent, requestsOf, statusOf } from './figures.js';
import { KeyPage, Keys } from './keys.js';
import { api, DataTable, ErrorNote, html, TOKEN, usePolled, when } from './ui.js';
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

function Overview() {
  const [top, error] = usePolled(
    () => /** @type {Promise<import('./types.js').Top>} */ (api('GET', '/admin/usage?window=24h&limit=10')),
    15_000,
    [],
  );
  // Bans are looked for among the newest live keys (one page): the list is paged, and a ban is
  // short-lived, so an older key's shows on its own page.
  const [livePage] = usePolled(
    () => /** @type {Promise<import('./types.js').KeyPage>} */ (api('GET', '/admin/keys?revoked=false&limit=500')),
    15_000,
    [],
  );
  const keys = livePage?.items ?? null;
  // Requests per minute by plan: the last hour's counts, moving as the polls go.
  const [hourly] = usePolled(
    () => /** @type {Promise<import('./types.js').Top>} */ (api('GET', '/admin/usage?window=1h&limit=1')),
    10_000,
    [],
  );
  const banned = (keys ?? []).filter((k) => statusOf(k) === 'banned');
  const minutes = minutesIntoHour(Date.now());
  const totals = top?.totals;
  const requests = requestsOf(totals);
  const refused = refusedPercent(totals);
  return html`<section aria-labelledby="overview-title">
    <h1 id="overview-title">Overview</h1>
    <${ErrorNote} error=${error} />
    <div class="cards">
      <div class="card"><span class="label">Requests, 24 h</span><span class="value" data-testid="total-requests">${requests ?? '…'}</span>
        ${
          totals
            ? html`<span class="detail"
                ><span data-testid="total-admitted">${totals.admitted}</span> admitted, <span data-testid="total-refused"
                  >${totals.refused}</span
                > refused (429)${totals.forbidden > 0 ? `, ${totals.forbidden} forbidden (403)` : ''}</span
              >`
            : null
        }
      </div>
      <div class="card"><span class="label">Refused, 24 h</span><span class="value">${totals?.refused ?? '…'}</span>
        ${refused !== null ? html`<span class="detail">${refused} % of requests</span>` : null}
      </div>
      <div class="card"><span class="label">${livePage?.next ? 'Banned now, newest 500 live keys' : 'Banned now'}</span><span class="value" data-testid="banned-now">${keys ? banned.length : '…'}</span></div>
      <div class="card"><span class="label">Active keys, 24 h</span><span class="value">${totals?.keys ?? '…'}</span></div>
    </div>
    <h2>Requests per minute by plan (this hour)</h2>
    <${DataTable} label="Requests per minute by plan" testid="plans-per-minute"
      columns=${['plan', 'admitted per minute', 'refused per minute', 'keys']}
      rows=${(hourly?.plans ?? []).map((p) => [p.plan, (p.admitted / minutes).toFixed(1), (p.refused / minutes).toFixed(1), p.keys])} />
    ${top ? html`<${HourlyChart} title="All keys, per hour, last 24 h" rows=${top.hours} />` : null}
    <h2>Top keys, 24 h</h2>
    <${DataTable} label="Top keys" testid="top-keys" columns=${['key', 'name', 'plan', 'admitted', 'refused']}
      rows=${(top?.keys ?? []).map((k) => [html`<a href=${`#/keys/${k.id}`}>${k.id}</a>`, k.name, k.plan, k.admitted, k.refused])} />
    ${
      banned.length > 0
        ? html`<h2>Banned now</h2><ul>${banned.map((k) => html`<li><a href=${`#/keys/${k.id}`}>${k.id}</a> ${k.name} until ${when(k.bannedUntil)}</li>`)}</ul>`
        : null
    }
  </section>`;
}
/** Each list page's item page, by the route's first part. */
const ITEM_PAGES = { keys: KeyPage, customers: CustomerPage, webhooks: WebhookPage };

/**
 * The page for a hash route: #/overview, #/keys, #/keys/<id>, #/customers, #/customers/<id>,
 * #/webhooks, #/webhooks/<id>.
 */
function pageFor(route) {
  const item = /^#\/(keys|customers|webhooks)\/(.+)$/.exec(route);
  if (item) return html`<${ITEM_PAGES[item[1]]} id=${decodeURIComponent(item[2])} />`;
  if (route.startsWith('#/keys')) return html`<${Keys} />`;
  if (route.startsWith('#/customers')) return html`<${Customers} />`;
  if (route.startsWith('#/webhooks')) return html`<${Webhooks} />`;
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
      </nav>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main>${page}</main>`;
}

const root = /** @type {HTMLElement} */ (document.getElementById('app'));
// The static "Loading" line goes: preact appends to what it did not render itself.
root.textContent = '';
render(html`<${App} />`, root);
