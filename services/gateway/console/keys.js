// The keys pages: the table with its filters, a key's page with its live windows, history and
// actions, and the create dialog.

import { useState } from 'preact/hooks';
import { HourlyChart } from './charts.js';
import { api, Confirm, ErrorNote, html, SecretOnce, usePolled, when } from './ui.js';

const HOUR = 3_600_000;

export function statusOf(key, now = Date.now()) {
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

export function Keys() {
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
    <p class="count" aria-live="polite">${keys ? `${shown.length} of ${keys.length} ${keys.length === 1 ? 'key' : 'keys'}` : 'Loading…'}</p>
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

export function KeyPage({ id }) {
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
      <dt>limits</dt><dd data-testid="key-limits">${limitsText(keyView.limits)}</dd>
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
