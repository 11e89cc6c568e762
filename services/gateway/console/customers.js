// @ts-check
// The customers pages: the list, searched and filtered by the admin API itself, and a customer's
// page with its settings, its shared windows live, its keys, its usage by hour, day and billing
// period, its credits and invoice preview (billing.js), and its actions (change its name, plan,
// billing or external id; delete it).

import { useState } from 'preact/hooks';
import { CreditsPanel, InvoicePanel } from './billing.js';
import { UsageChart } from './charts.js';
import { limitsText, periodText, statusOf } from './figures.js';
import { MAX_ANCHOR_DAY, WINDOWS } from './key-rules.js';
import { LimitFields, limitsOf } from './limit-fields.js';
import { api, Confirm, DataTable, ErrorNote, html, rememberZone, usePolled, when } from './ui.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Customers a page asks the admin API for at a time, as the keys page does. */
const PAGE_SIZE = 100;
/** Keys of one customer listed on its page; more are said to be there, not shown. */
const KEYS_SHOWN = 500;

/**
 * The first `pages` pages of customers matching `filters` (the list's own query: name prefix,
 * plan, externalId), newest first, each read after the one before; `more` says whether another
 * page follows.
 * @param {number} pages
 * @param {Record<string, string>} filters
 */
async function firstPages(pages, filters) {
  /** @type {import('./types.js').CustomerView[]} */
  const customers = [];
  /** @type {string | null} */
  let next = null;
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  for (const [name, value] of Object.entries(filters)) if (value.trim()) query.set(name, value.trim());
  for (let i = 0; i < pages; i++) {
    if (next !== null) query.set('after', next);
    const page = /** @type {import('./types.js').CustomerPage} */ (await api('GET', `/admin/customers?${query}`));
    customers.push(...page.items);
    next = page.next;
    if (next === null) break;
  }
  return { customers, more: next !== null };
}

/** `day 15, Europe/Paris`: when a customer's billing month starts, and in which zone. */
const billingText = (billing) => `day ${billing.anchorDay}, ${billing.timeZone}`;

export function Customers() {
  const [filters, setFilters] = useState({ name: '', plan: '', externalId: '' });
  const [pages, setPages] = useState(1);
  // The admin API narrows: a name prefix finds a customer however many pages precede it.
  const [listed, error] = usePolled(() => firstPages(pages, filters), 30_000, [pages, filters]);
  const [plans] = usePolled(
    () => /** @type {Promise<import('./types.js').Plans>} */ (api('GET', '/admin/plans')),
    0,
    [],
  );
  const filter = (name) => (event) => {
    setFilters((f) => ({ ...f, [name]: event.currentTarget.value }));
    setPages(1);
  };
  const customers = listed?.customers ?? null;
  return html`<section aria-labelledby="customers-title">
    <h1 id="customers-title">Customers</h1>
    <${ErrorNote} error=${error} />
    <div class="filters" role="search">
      <label for="customer-name">Name starts with</label>
      <input id="customer-name" type="search" value=${filters.name} onInput=${filter('name')} />
      <label for="customer-plan">Plan</label>
      <select id="customer-plan" value=${filters.plan} onChange=${filter('plan')}>
        <option value="">any</option>
        ${(plans?.plans ?? []).map((p) => html`<option value=${p.name}>${p.name}</option>`)}
      </select>
      <label for="customer-external">External id</label>
      <input id="customer-external" type="search" value=${filters.externalId} onInput=${filter('externalId')} />
    </div>
    <p class="count" aria-live="polite">${customers ? `${customers.length}${listed?.more ? ' loaded' : ''} ${customers.length === 1 ? 'customer' : 'customers'}` : 'Loading…'}</p>
    <${DataTable} label="Customers" testid="customers-table" columns=${['customer', 'name', 'plan', 'external id', 'billing', 'created']}
      rows=${(customers ?? []).map((c) => [
        html`<a href=${`#/customers/${c.id}`}>${c.id}</a>`,
        c.name,
        c.plan,
        c.externalId ?? '—',
        billingText(c.billing),
        when(c.createdAt, c.billing.timeZone),
      ])} />
    ${listed?.more ? html`<button type="button" onClick=${() => setPages((n) => n + 1)}>More</button>` : null}
  </section>`;
}

/** The counts a day or period row shows, in the order of its table's columns after the first. */
const COUNT_COLUMNS = ['admitted', 'refused (429)', 'out of credits (402)', 'forbidden', 'failed upstream', 'units'];
const countsOf = (s) => [s.admitted, s.refused, s.outOfCredits, s.forbidden, s.upstreamFailed, s.units];

/** `1234 of 10000 units so far`: the current period's units against its month window, or null without one. */
function quotaText(periodRow, limits) {
  return periodRow && limits.perMonth ? `${periodRow.units} of ${limits.perMonth} units so far` : null;
}

/**
 * The customer's usage in its own calendar: by hour over the last 7 days (the key page's chart),
 * by local day over its current billing period (the whole period on the axis, the days to come
 * empty), and by billing period, the current one so far and the one before when the history
 * still keeps it whole.
 * @param {{ path: string, customer: import('./types.js').CustomerView }} props
 */
function CustomerHistory({ path, customer }) {
  const { timeZone } = customer.billing;
  const [hours] = usePolled(
    () => {
      const now = Date.now();
      const from = new Date(now - (now % HOUR) - (7 * 24 - 1) * HOUR).toISOString();
      return /** @type {Promise<import('./types.js').CustomerHistory>} */ (
        api('GET', `${path}/usage/history?granularity=hour&from=${encodeURIComponent(from)}`)
      );
    },
    30_000,
    [path],
  );
  const [days, daysError] = usePolled(
    () =>
      /** @type {Promise<import('./types.js').CustomerHistory>} */ (
        api('GET', `${path}/usage/history?granularity=day&period=current`)
      ),
    30_000,
    // New billing settings start a new period: its days are asked for again.
    [path, customer.currentPeriod.start],
  );
  const [periods, periodsError] = usePolled(
    async () => {
      const current = await api('GET', `${path}/usage/history?granularity=period`);
      // The period before is asked for only when the history surely keeps it whole (it is at most
      // 31 days long), as it does when USAGE_HISTORY_DAYS is over two months: with the default
      // 35 days the admin API would refuse it with a 400 on every poll.
      const kept = Date.now() - current.retentionDays * DAY;
      const whole = Date.parse(current.from) - 31 * DAY >= kept;
      const previous = whole
        ? await api('GET', `${path}/usage/history?granularity=period&period=previous`).catch(() => null)
        : null;
      return [...(previous?.series ?? []), ...current.series];
    },
    30_000,
    [path, customer.currentPeriod.start],
  );
  const { start, end } = customer.currentPeriod;
  const quota = quotaText(periods?.at(-1), customer.limits);
  return html`<h2>Usage</h2>
    ${hours ? html`<${UsageChart} title="All its keys, admitted and refused per hour, last 7 days" rows=${hours.series} timeZone=${timeZone} />` : null}
    <${ErrorNote} error=${daysError} />
    ${
      days
        ? html`<${UsageChart} step="day" timeZone=${timeZone} span=${[start, end]} testid="customer-days"
            title=${`This billing period by day, ${periodText(start, end, timeZone)} (${timeZone})${quota ? `: ${quota}` : ''}`}
            rows=${days.series} />`
        : null
    }
    <h3>By billing period</h3>
    <${ErrorNote} error=${periodsError} />
    <${DataTable} label="Usage by billing period" testid="customer-periods" columns=${['period', ...COUNT_COLUMNS]}
      rows=${(periods ?? []).map((s) => [periodText(s.start, s.end, timeZone), ...countsOf(s)])} />`;
}

/**
 * The fields of the change dialog that differ from the customer's: a PATCH names only what
 * changes, so its audit line does too; an emptied external id is removed (null), and so are its
 * own limits when the operator asks for the plan's.
 * @param {import('./types.js').CustomerView} customer
 * @param {FormData} form
 */
function changesOf(customer, form) {
  const body = {};
  const name = String(form.get('name') ?? '').trim();
  if (name && name !== customer.name) body.name = name;
  if (form.get('plan') !== customer.plan) body.plan = form.get('plan');
  const billing = { anchorDay: Number(form.get('anchorDay')), timeZone: String(form.get('timeZone') ?? '').trim() };
  if (billing.anchorDay !== customer.billing.anchorDay || billing.timeZone !== customer.billing.timeZone)
    body.billing = billing;
  const externalId = String(form.get('externalId') ?? '').trim();
  if (externalId !== (customer.externalId ?? '')) body.externalId = externalId || null;
  // Typed limits replace its own, as a key's do; the box drops them for the plan's alone.
  const limits = limitsOf(form);
  if (limits) body.limits = limits;
  else if (form.get('planLimits') && customer.ownLimits) body.limits = null;
  return body;
}

function CustomerActions({ customer, plans, onChanged }) {
  const [dialog, setDialog] = useState(/** @type {'change' | 'delete' | null} */ (null));
  const close = () => setDialog(null);
  const path = `/admin/customers/${encodeURIComponent(customer.id)}`;
  // The fields start from defaultValue, not value: the page re-renders with each poll of the live
  // windows, and a value would put back the customer's over what the operator was typing.
  return html`<div class="actions" role="group" aria-label="Customer actions">
      <button type="button" onClick=${() => setDialog('change')}>Change plan, limits or billing</button>
      <button type="button" class="danger" onClick=${() => setDialog('delete')}>Delete</button>
    </div>
    <${Confirm} open=${dialog === 'change'} title=${`Change ${customer.name}`} confirmLabel="Save" onClose=${close}
      onConfirm=${async (form) => {
        const body = changesOf(customer, form);
        if (Object.keys(body).length > 0) await api('PATCH', path, body);
        close();
        onChanged();
      }}>
      <label for="customer-edit-name">Name</label>
      <input id="customer-edit-name" name="name" maxlength="100" required defaultValue=${customer.name} />
      <label for="customer-edit-plan">Plan (its keys follow)</label>
      <select id="customer-edit-plan" name="plan">${plans.map((p) => html`<option value=${p.name} selected=${p.name === customer.plan}>${p.name}</option>`)}</select>
      <${LimitFields} prefix="customer-edit" legend="Own limits, shared by its keys (empty: unchanged)" current=${customer.ownLimits ?? null}>
        <label class="inline"><input type="checkbox" name="planLimits" /> Use the plan's limits</label>
      <//>
      <label for="customer-edit-anchor">Billing month starts on day</label>
      <input id="customer-edit-anchor" name="anchorDay" type="number" min="1" max=${MAX_ANCHOR_DAY} step="1" required defaultValue=${customer.billing.anchorDay} />
      <label for="customer-edit-zone">Time zone (IANA)</label>
      <input id="customer-edit-zone" name="timeZone" required defaultValue=${customer.billing.timeZone} aria-describedby="customer-edit-zone-hint" />
      <p class="hint" id="customer-edit-zone-hint">Europe/Paris, Asia/Kolkata, America/New_York, UTC. New billing starts new periods from the next request.</p>
      <label for="customer-edit-external">External id (empty: none)</label>
      <input id="customer-edit-external" name="externalId" maxlength="128" defaultValue=${customer.externalId ?? ''} />
    <//>
    <${Confirm} open=${dialog === 'delete'} title=${`Delete ${customer.name}?`} confirmLabel="Delete" danger=${true} onClose=${close}
      onConfirm=${async (form) => {
        await api('DELETE', `${path}${form.get('revokeKeys') ? '?revokeKeys=true' : ''}`);
        close();
        location.hash = '#/customers';
      }}>
      <p>Its usage history is kept; the customer itself cannot be brought back.</p>
      <label class="inline"><input type="checkbox" name="revokeKeys" /> Revoke its live keys with it (a customer with live keys is not deleted otherwise)</label>
    <//>`;
}

export function CustomerPage({ id }) {
  const path = `/admin/customers/${encodeURIComponent(id)}`;
  const [customer, error, reload] = usePolled(
    () => /** @type {Promise<import('./types.js').CustomerView>} */ (api('GET', path)),
    0,
    [id],
  );
  const [usage, usageError] = usePolled(
    () => /** @type {Promise<import('./types.js').CustomerUsage>} */ (api('GET', `${path}/usage`)),
    2_000,
    [id],
  );
  const [keys, keysError, reloadKeys] = usePolled(
    () =>
      /** @type {Promise<import('./types.js').KeyPage>} */ (
        api('GET', `/admin/keys?customerId=${encodeURIComponent(id)}&limit=${KEYS_SHOWN}`)
      ),
    15_000,
    [id],
  );
  const [plans] = usePolled(
    () => /** @type {Promise<import('./types.js').Plans>} */ (api('GET', '/admin/plans')),
    0,
    [],
  );
  if (error)
    return html`<section><h1>Customer ${id}</h1><${ErrorNote} error=${error} /><p><a href="#/customers">All customers</a></p></section>`;
  if (!customer) return html`<p>Loading…</p>`;
  const now = Date.now();
  // Every time on this page is on the customer's clock; the lists of keys show its keys' so too.
  const zone = customer.billing.timeZone;
  rememberZone(customer.id, zone);
  return html`<section aria-labelledby="customer-title">
    <p><a href="#/customers">← All customers</a></p>
    <h1 id="customer-title">${customer.name}</h1>
    <dl class="fields">
      <dt>id</dt><dd data-testid="customer-id">${customer.id}</dd>
      <dt>plan</dt><dd data-testid="customer-plan">${customer.plan}</dd>
      <dt>limits</dt><dd data-testid="customer-limits">${limitsText(customer.limits, WINDOWS)}, shared by its keys</dd>
      <dt>own limits</dt><dd data-testid="customer-own-limits">${customer.ownLimits ? `${limitsText(customer.ownLimits, WINDOWS)} over the plan's` : 'none: the plan\u2019s'}</dd>
      <dt>billing</dt><dd data-testid="customer-billing">from ${billingText(customer.billing)}</dd>
      <dt>this period</dt><dd data-testid="customer-period">${periodText(customer.currentPeriod.start, customer.currentPeriod.end, customer.billing.timeZone)} (${customer.billing.timeZone})</dd>
      <dt>external id</dt><dd data-testid="customer-external-id">${customer.externalId ?? '—'}</dd>
      <dt>created</dt><dd>${when(customer.createdAt, zone)}</dd>
    </dl>
    ${
      plans
        ? html`<${CustomerActions} customer=${customer} plans=${plans.plans} onChanged=${() => {
            reload();
            reloadKeys();
          }} />`
        : null
    }
    <h2>Shared windows</h2>
    <p class="hint">Its keys' windows: every request of any of its keys counts toward them.</p>
    <${ErrorNote} error=${usageError} />
    <${DataTable} label="Shared windows" testid="customer-windows" columns=${['window', 'limit', 'used', 'remaining', 'resets']}
      rows=${Object.entries(usage?.windows ?? {}).map(([name, w]) => [name, w.limit, w.used, w.remaining, when(w.resetAt, zone)])} />
    <h2>Keys</h2>
    <${ErrorNote} error=${keysError} />
    <p class="count">${keys ? `${keys.items.length}${keys.next ? ' shown, more exist' : ''} ${keys.items.length === 1 ? 'key' : 'keys'}` : 'Loading…'}</p>
    <${DataTable} label="Keys of this customer" testid="customer-keys" columns=${['key', 'name', 'status', 'expires', 'banned until']}
      rows=${(keys?.items ?? []).map((k) => [
        html`<a href=${`#/keys/${k.id}`}>${k.id}</a>`,
        k.name,
        html`<span class=${`status ${statusOf(k, now)}`}>${statusOf(k, now)}</span>`,
        when(k.expiresAt, zone),
        when(k.bannedUntil, zone),
      ])} />
    <${CreditsPanel} path=${path} timeZone=${zone} />
    ${plans ? html`<${InvoicePanel} path=${path} plan=${customer.plan} timeZone=${customer.billing.timeZone} plans=${plans.plans} testid="customer-invoice" />` : null}
    <${CustomerHistory} path=${path} customer=${customer} />
  </section>`;
}
