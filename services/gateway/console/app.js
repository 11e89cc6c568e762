// The operators' console: a page over the admin API. The admin token lives in this tab's session
// storage only (gone when the tab closes; never in a URL, a cookie or a log); every action is an
// admin API call, so it is audited like any other.

import htm from 'htm';
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { HourlyChart } from './charts.js';

const html = htm.bind(h);
const TOKEN = 'animal-store-admin-token';
const HOUR = 3_600_000;

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const token = sessionStorage.getItem(TOKEN);
  const res = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (res.status === 204) return null;
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, data.code, data.message ?? `${res.status}`);
  return data;
}

function when(iso) {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—';
}

function statusOf(key, now = Date.now()) {
  if (key.revokedAt) return 'revoked';
  if (key.expiresAt && Date.parse(key.expiresAt) <= now) return 'expired';
  if (key.bannedUntil) return 'banned';
  return 'active';
}

function limitsText(limits) {
  const names = { perSecond: 's', perMinute: 'min', perHour: 'h', perDay: 'day', perMonth: 'month' };
  return Object.entries(limits ?? {})
    .map(([k, v]) => `${v}/${names[k] ?? k}`)
    .join(', ');
}

/** Reloads `load` every `ms` while mounted; returns [data, error, reload]. */
function usePolled(load, ms, deps) {
  const [state, setState] = useState({ data: null, error: null });
  const reload = useCallback(() => {
    load().then(
      (data) => setState({ data, error: null }),
      (error) => setState((s) => ({ data: s.data, error })),
    );
  }, deps);
  useEffect(() => {
    reload();
    if (!ms) return undefined;
    const timer = setInterval(reload, ms);
    return () => clearInterval(timer);
  }, [reload, ms]);
  return [state.data, state.error, reload];
}

/** The hash route: #/overview, #/keys, #/keys/<id>. */
function useRoute() {
  const [route, setRoute] = useState(location.hash || '#/overview');
  useEffect(() => {
    const onHash = () => setRoute(location.hash || '#/overview');
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  return route;
}

function ErrorNote({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.message}${error.code ? ` (${error.code})` : ''}</p>`;
}

/**
 * A modal that asks before an action; the dialog element traps focus and Escape closes it.
 * `children` is the form's fields; `onConfirm` runs the action and may show its result.
 */
function Confirm({ open, title, confirmLabel, danger, onConfirm, onClose, children }) {
  const ref = useRef(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) {
      setError(null);
      dialog.showModal();
    } else if (!open && dialog.open) dialog.close();
  }, [open]);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    try {
      await onConfirm(new FormData(event.currentTarget));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<dialog ref=${ref} onClose=${onClose} aria-labelledby="dialog-title">
    <form onSubmit=${submit}>
      <h2 id="dialog-title">${title}</h2>
      ${children}
      <${ErrorNote} error=${error} />
      <div class="actions">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class=${danger ? 'danger' : 'primary'} disabled=${busy}>${confirmLabel}</button>
      </div>
    </form>
  </dialog>`;
}

/** A secret shown once, with a copy button; it lives in this component's state only. */
function SecretOnce({ secret, what, onDone }) {
  const ref = useRef(null);
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied(true);
    } catch {
      // A browser that refuses the clipboard: the field is selected for Ctrl+C instead.
      ref.current?.querySelector('input')?.select();
    }
  };
  return html`<dialog ref=${ref} onClose=${onDone} aria-labelledby="secret-title">
    <h2 id="secret-title">${what}</h2>
    <p>Store it now: it is not shown again.</p>
    <label for="secret">API key</label>
    <input id="secret" readonly value=${secret} data-testid="secret" onFocus=${(e) => e.currentTarget.select()} />
    <div class="actions">
      <button type="button" onClick=${copy}>${copied ? 'Copied' : 'Copy'}</button>
      <button type="button" class="primary" onClick=${() => ref.current?.close()}>Done</button>
    </div>
  </dialog>`;
}

function SignIn({ onSignedIn }) {
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    const token = new FormData(event.currentTarget).get('token');
    sessionStorage.setItem(TOKEN, token);
    try {
      await api('GET', '/admin/plans');
      onSignedIn();
    } catch (err) {
      sessionStorage.removeItem(TOKEN);
      setError(err.status === 401 ? new Error('That admin token is not valid.') : err);
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
  const [top, error] = usePolled(() => api('GET', '/admin/usage?window=24h&limit=10'), 15_000, []);
  const [keys] = usePolled(() => api('GET', '/admin/keys'), 15_000, []);
  // Requests per minute by plan: the last hour's counts, moving as the polls go.
  const [hourly] = usePolled(() => api('GET', '/admin/usage?window=1h&limit=1'), 10_000, []);
  const banned = (keys ?? []).filter((k) => statusOf(k) === 'banned');
  const minutes = Math.max(1, (Date.now() % HOUR) / 60_000);
  return html`<section aria-labelledby="overview-title">
    <h1 id="overview-title">Overview</h1>
    <${ErrorNote} error=${error} />
    <div class="cards">
      <div class="card"><span class="label">Requests, 24 h</span><span class="value" data-testid="total-admitted">${top?.totals.admitted ?? '…'}</span></div>
      <div class="card"><span class="label">Refused, 24 h</span><span class="value">${top?.totals.refused ?? '…'}</span></div>
      <div class="card"><span class="label">Banned now</span><span class="value" data-testid="banned-now">${keys ? banned.length : '…'}</span></div>
      <div class="card"><span class="label">Active keys, 24 h</span><span class="value">${top?.totals.keys ?? '…'}</span></div>
    </div>
    <h2>Requests per minute by plan (this hour)</h2>
    <div class="table-wrap" tabindex="0" role="region" aria-label="Requests per minute by plan"><table>
      <thead><tr><th scope="col">plan</th><th scope="col">per minute</th><th scope="col">refused per minute</th><th scope="col">keys</th></tr></thead>
      <tbody>${(hourly?.plans ?? []).map(
        (p) =>
          html`<tr><td>${p.plan}</td><td>${(p.admitted / minutes).toFixed(1)}</td><td>${(p.refused / minutes).toFixed(1)}</td><td>${p.keys}</td></tr>`,
      )}</tbody>
    </table></div>
    ${top ? html`<${HourlyChart} title="All keys, per hour, last 24 h" rows=${top.hours} />` : null}
    <h2>Top keys, 24 h</h2>
    <div class="table-wrap" tabindex="0" role="region" aria-label="Top keys"><table>
      <thead><tr><th scope="col">key</th><th scope="col">name</th><th scope="col">plan</th><th scope="col">admitted</th><th scope="col">refused</th></tr></thead>
      <tbody>${(top?.keys ?? []).map(
        (k) =>
          html`<tr><td><a href=${`#/keys/${k.id}`}>${k.id}</a></td><td>${k.name}</td><td>${k.plan}</td><td>${k.admitted}</td><td>${k.refused}</td></tr>`,
      )}</tbody>
    </table></div>
    ${
      banned.length > 0
        ? html`<h2>Banned now</h2><ul>${banned.map((k) => html`<li><a href=${`#/keys/${k.id}`}>${k.id}</a> ${k.name} until ${when(k.bannedUntil)}</li>`)}</ul>`
        : null
    }
  </section>`;
}

function CreateKey({ plans, onCreated }) {
  const [open, setOpen] = useState(false);
  const [secret, setSecret] = useState(null);
  const create = async (form) => {
    const body = { plan: form.get('plan') };
    if (form.get('name')) body.name = form.get('name');
    if (form.get('expiresAt')) body.expiresAt = new Date(form.get('expiresAt')).toISOString();
    for (const field of ['perMinute', 'perDay']) {
      if (form.get(field)) body.limits = { ...body.limits, [field]: Number(form.get(field)) };
    }
    const created = await api('POST', '/admin/keys', body);
    setOpen(false);
    setSecret(created);
    onCreated(created);
  };
  return html`<button type="button" class="primary" onClick=${() => setOpen(true)}>Create key</button>
    <${Confirm} open=${open} title="Create an API key" confirmLabel="Create" onConfirm=${create} onClose=${() => setOpen(false)}>
      <label for="new-plan">Plan</label>
      <select id="new-plan" name="plan" required>${plans.map((p) => html`<option value=${p.name}>${p.name}</option>`)}</select>
      <label for="new-name">Name</label>
      <input id="new-name" name="name" maxlength="100" />
      <label for="new-expiry">Expires (optional)</label>
      <input id="new-expiry" name="expiresAt" type="datetime-local" />
      <fieldset>
        <legend>Own limits (optional; a plan without windows needs them)</legend>
        <label for="new-minute">Per minute</label><input id="new-minute" name="perMinute" type="number" min="1" />
        <label for="new-day">Per day</label><input id="new-day" name="perDay" type="number" min="1" />
      </fieldset>
    <//>
    ${
      secret
        ? html`<${SecretOnce} secret=${secret.key} what=${`Key ${secret.id} created`} onDone=${() => {
            setSecret(null);
            location.hash = `#/keys/${secret.id}`;
          }} />`
        : null
    }`;
}

function Keys() {
  const [keys, error, reload] = usePolled(() => api('GET', '/admin/keys'), 30_000, []);
  const [plans] = usePolled(() => api('GET', '/admin/plans'), 0, []);
  const [query, setQuery] = useState('');
  const [plan, setPlan] = useState('');
  const [status, setStatus] = useState('');
  const now = Date.now();
  const shown = (keys ?? []).filter((k) => {
    const text = `${k.id} ${k.name} ${k.prefix ?? ''}`.toLowerCase();
    return (
      (!query || text.includes(query.toLowerCase())) &&
      (!plan || k.plan === plan) &&
      (!status || statusOf(k, now) === status)
    );
  });
  return html`<section aria-labelledby="keys-title">
    <div class="title-row">
      <h1 id="keys-title">Keys</h1>
      ${plans ? html`<${CreateKey} plans=${plans.plans} onCreated=${reload} />` : null}
    </div>
    <${ErrorNote} error=${error} />
    <div class="filters" role="search">
      <label for="q">Search</label>
      <input id="q" type="search" placeholder="id, name or prefix" value=${query} onInput=${(e) => setQuery(e.currentTarget.value)} />
      <label for="plan-filter">Plan</label>
      <select id="plan-filter" value=${plan} onChange=${(e) => setPlan(e.currentTarget.value)}>
        <option value="">any</option>
        ${(plans?.plans ?? []).map((p) => html`<option value=${p.name}>${p.name}</option>`)}
      </select>
      <label for="status-filter">Status</label>
      <select id="status-filter" value=${status} onChange=${(e) => setStatus(e.currentTarget.value)}>
        <option value="">any</option><option>active</option><option>banned</option><option>expired</option><option>revoked</option>
      </select>
    </div>
    <p class="count" aria-live="polite">${keys ? `${shown.length} of ${keys.length} keys` : 'Loading…'}</p>
    <div class="table-wrap" tabindex="0" role="region" aria-label="Keys"><table data-testid="keys-table">
      <thead><tr><th scope="col">key</th><th scope="col">name</th><th scope="col">plan</th><th scope="col">status</th><th scope="col">expires</th><th scope="col">banned until</th></tr></thead>
      <tbody>${shown.map(
        (k) => html`<tr>
          <td><a href=${`#/keys/${k.id}`}>${k.id}</a></td><td>${k.name}</td><td>${k.plan}</td>
          <td><span class=${`status ${statusOf(k, now)}`}>${statusOf(k, now)}</span></td>
          <td>${when(k.expiresAt)}</td><td>${when(k.bannedUntil)}</td>
        </tr>`,
      )}</tbody>
    </table></div>
  </section>`;
}

function KeyActions({ keyView, plans, onChanged }) {
  const [dialog, setDialog] = useState(null);
  const [secret, setSecret] = useState(null);
  const close = () => setDialog(null);
  const live = !keyView.revokedAt && keyView.source === 'store';
  const run = (fn) => async (form) => {
    await fn(form);
    close();
    onChanged();
  };
  const path = `/admin/keys/${encodeURIComponent(keyView.id)}`;
  return html`<div class="actions" role="group" aria-label="Key actions">
      <button type="button" disabled=${!live} onClick=${() => setDialog('plan')}>Change plan or limits</button>
      <button type="button" disabled=${!live} onClick=${() => setDialog('rotate')}>Rotate</button>
      <button type="button" disabled=${!keyView.bannedUntil} onClick=${() => setDialog('unban')}>Lift ban</button>
      <button type="button" class="danger" disabled=${!live} onClick=${() => setDialog('revoke')}>Revoke</button>
    </div>
    <${Confirm} open=${dialog === 'plan'} title=${`Change ${keyView.id}`} confirmLabel="Save" onClose=${close}
      onConfirm=${run(async (form) => {
        const body = { plan: form.get('plan') };
        const limits = {};
        for (const field of ['perMinute', 'perDay']) if (form.get(field)) limits[field] = Number(form.get(field));
        if (Object.keys(limits).length > 0) body.limits = limits;
        else if (form.get('planLimits')) body.limits = null;
        await api('PATCH', path, body);
      })}>
      <label for="plan-select">Plan</label>
      <select id="plan-select" name="plan">${plans.map((p) => html`<option value=${p.name} selected=${p.name === keyView.plan}>${p.name}</option>`)}</select>
      <fieldset>
        <legend>Own limits (empty: unchanged)</legend>
        <label for="edit-minute">Per minute</label><input id="edit-minute" name="perMinute" type="number" min="1" />
        <label for="edit-day">Per day</label><input id="edit-day" name="perDay" type="number" min="1" />
        <label class="inline"><input type="checkbox" name="planLimits" /> Use the plan's limits</label>
      </fieldset>
    <//>
    <${Confirm} open=${dialog === 'rotate'} title=${`Rotate ${keyView.id}`} confirmLabel="Rotate" onClose=${close}
      onConfirm=${async (form) => {
        const rotated = await api('POST', `${path}/rotate`, { gracePeriodSeconds: Number(form.get('grace')) });
        close();
        setSecret(rotated);
      }}>
      <p>A new secret for the same key; the old one keeps working for the grace period.</p>
      <label for="grace">Grace period (seconds)</label>
      <input id="grace" name="grace" type="number" min="0" max="2592000" value="86400" required />
    <//>
    <${Confirm} open=${dialog === 'unban'} title=${`Lift the ban on ${keyView.id}?`} confirmLabel="Lift ban" onClose=${close}
      onConfirm=${run(() => api('DELETE', `${path}/ban`))}>
      <p>Its refusals are forgotten; it is served again on every replica.</p>
    <//>
    <${Confirm} open=${dialog === 'revoke'} title=${`Revoke ${keyView.id}?`} confirmLabel="Revoke" danger=${true} onClose=${close}
      onConfirm=${run(() => api('DELETE', path))}>
      <p>Both its secrets stop working on every replica within seconds. This cannot be undone.</p>
    <//>
    ${
      secret
        ? html`<${SecretOnce} secret=${secret.key} what=${`Key ${secret.id} rotated`} onDone=${() => {
            setSecret(null);
            onChanged();
          }} />`
        : null
    }`;
}

function KeyPage({ id }) {
  const path = `/admin/keys/${encodeURIComponent(id)}`;
  const [keyView, error, reload] = usePolled(() => api('GET', path), 0, [id]);
  const [usage, usageError] = usePolled(() => api('GET', `${path}/usage`), 2_000, [id]);
  const [history] = usePolled(
    () => {
      const now = Date.now();
      const from = new Date(now - (now % HOUR) - (7 * 24 - 1) * HOUR).toISOString();
      return api('GET', `${path}/usage/history?granularity=hour&from=${encodeURIComponent(from)}`);
    },
    30_000,
    [id],
  );
  const [plans] = usePolled(() => api('GET', '/admin/plans'), 0, []);
  if (error)
    return html`<section><h1>Key ${id}</h1><${ErrorNote} error=${error} /><p><a href="#/keys">All keys</a></p></section>`;
  if (!keyView) return html`<p>Loading…</p>`;
  return html`<section aria-labelledby="key-title">
    <p><a href="#/keys">← All keys</a></p>
    <h1 id="key-title">${keyView.name || keyView.id}</h1>
    <dl class="fields">
      <dt>id</dt><dd data-testid="key-id">${keyView.id}</dd>
      <dt>status</dt><dd><span class=${`status ${statusOf(keyView)}`} data-testid="key-status">${statusOf(keyView)}</span></dd>
      <dt>plan</dt><dd data-testid="key-plan">${keyView.plan}</dd>
      <dt>limits</dt><dd>${limitsText(keyView.limits)}</dd>
      <dt>scopes</dt><dd>${keyView.scopes.join(', ')}</dd>
      <dt>addresses</dt><dd>${keyView.allowedCidrs ? keyView.allowedCidrs.join(', ') : 'any'}</dd>
      <dt>expires</dt><dd>${when(keyView.expiresAt)}</dd>
      ${keyView.previousKeyExpiresAt ? html`<dt>old secret until</dt><dd>${when(keyView.previousKeyExpiresAt)}</dd>` : null}
      <dt>created</dt><dd>${when(keyView.createdAt)}</dd>
      ${keyView.revokedAt ? html`<dt>revoked</dt><dd>${when(keyView.revokedAt)}</dd>` : null}
      ${keyView.bannedUntil ? html`<dt>banned until</dt><dd>${when(keyView.bannedUntil)}</dd>` : null}
    </dl>
    ${plans ? html`<${KeyActions} keyView=${keyView} plans=${plans.plans} onChanged=${reload} />` : null}
    <h2>Live windows</h2>
    <${ErrorNote} error=${usageError} />
    <div class="table-wrap" tabindex="0" role="region" aria-label="Live windows"><table data-testid="windows">
      <thead><tr><th scope="col">window</th><th scope="col">limit</th><th scope="col">used</th><th scope="col">remaining</th><th scope="col">resets</th></tr></thead>
      <tbody>${Object.entries(usage?.windows ?? {}).map(
        ([name, w]) =>
          html`<tr><td>${name}</td><td>${w.limit}</td><td>${w.used}</td><td>${w.remaining}</td><td>${when(w.resetAt)}</td></tr>`,
      )}</tbody>
    </table></div>
    ${history ? html`<${HourlyChart} title="Admitted and refused per hour, last 7 days" rows=${history.series} />` : null}
  </section>`;
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
  const keyMatch = /^#\/keys\/(.+)$/.exec(route);
  const page = keyMatch
    ? html`<${KeyPage} id=${decodeURIComponent(keyMatch[1])} />`
    : route.startsWith('#/keys')
      ? html`<${Keys} />`
      : html`<${Overview} />`;
  const current = (hash) => (route.startsWith(hash) ? 'page' : undefined);
  return html`<header>
      <a class="brand" href="#/overview">Animal store API</a>
      <nav aria-label="Console">
        <a href="#/overview" aria-current=${current('#/overview')}>Overview</a>
        <a href="#/keys" aria-current=${current('#/keys')}>Keys</a>
      </nav>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main>${page}</main>`;
}

const root = document.getElementById('app');
// The static "Loading" line goes: preact appends to what it did not render itself.
root.textContent = '';
render(html`<${App} />`, root);
