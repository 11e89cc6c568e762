// @ts-check
// A customer's money on its console page: its credits (balance, refill terms, the ledger a page at
// a time, top-ups, grants and adjustments) and its invoice preview (this billing period so far or
// the one before, with its CSV), which a lone key's page shows too. Amounts stay integers in minor
// units until money() writes them.

import { money } from '@shared/format.js';
import { useEffect, useRef, useState } from 'preact/hooks';
import { outOfCredits, periodText } from './figures.js';
import { api, apiFile, Confirm, DataTable, ErrorNote, html, Notice, usePolled, when } from './ui.js';

/** Ledger entries a page shows at a time; Older entries asks for the next page. */
const LEDGER_PAGE = 10;

/** `100000 each billing period`: a customer's refill terms, or what it has without them. */
function refillText(terms) {
  if (!terms) return 'none: its keys spend no credits';
  if (!terms.refill) return 'no refill: the balance changes by top-ups, grants and adjustments only';
  return `up to ${terms.refill.amount} each ${terms.refill.every === 'day' ? 'day' : 'billing period'}`;
}

/** What a ledger entry says beyond its type and amount: the reason, the hour spent, the period refilled. */
function entryDetail(entry, zone) {
  if (entry.type === 'spend') return `requests from ${when(entry.at, zone)} to ${when(entry.end, zone)}`;
  if (entry.type === 'refund') return `unserved requests from ${when(entry.at, zone)} to ${when(entry.end, zone)}`;
  if (entry.type === 'refill') return `for ${entry.period?.startsWith('day:') ? 'the day' : 'the billing period'}`;
  return entry.reason ?? '';
}

/**
 * The ledger newest first, a page at a time: read again from its first page whenever `version`
 * changes (a change made here), and extended by `more`.
 * @param {string} path
 * @param {number} version
 */
function useLedger(path, version) {
  const [state, setState] = useState(
    /** @type {{ items: any[], next: string | null, error: any }} */ ({ items: [], next: null, error: null }),
  );
  const load = async (after) => {
    const query = new URLSearchParams({ limit: String(LEDGER_PAGE), ...(after ? { after } : {}) });
    try {
      const page = await api('GET', `${path}/credits/ledger?${query}`);
      setState((s) => ({ items: [...(after ? s.items : []), ...page.items], next: page.next, error: null }));
    } catch (error) {
      setState((s) => ({ ...s, error }));
    }
  };
  useEffect(() => {
    load(null);
  }, [path, version]);
  return { ...state, more: () => load(state.next) };
}

/**
 * A top-up, grant or adjustment. Each change is sent with an Idempotency-Key drawn for it: sent
 * again as it was (a double click, a retry after an answer that never came) it keeps its key, so
 * the admin API adds it once; a change to the form draws a new one, as does a change that was made.
 */
function CreditChangeForm({ path, onChanged }) {
  const attempt = useRef(/** @type {{ key: string, body: string } | null} */ (null));
  const [error, setError] = useState(/** @type {any} */ (null));
  const [made, setMade] = useState(/** @type {any} */ (null));
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    const form = /** @type {HTMLFormElement} */ (event.currentTarget);
    const fields = new FormData(form);
    const body = {
      amount: Number(fields.get('amount')),
      reason: String(fields.get('reason') ?? '').trim(),
      type: String(fields.get('type') ?? 'topup'),
    };
    const text = JSON.stringify(body);
    if (attempt.current?.body !== text) attempt.current = { key: crypto.randomUUID(), body: text };
    setBusy(true);
    try {
      const change = await api('POST', `${path}/credits`, body, { 'idempotency-key': attempt.current.key });
      attempt.current = null;
      form.reset();
      setError(null);
      setMade(change);
      onChanged();
    } catch (err) {
      setMade(null);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="credit-change" onSubmit=${submit} aria-labelledby="credit-change-title">
    <h3 id="credit-change-title">Add or take credits</h3>
    <label for="credit-type">Kind</label>
    <select id="credit-type" name="type">
      <option value="topup">Top-up (bought)</option>
      <option value="grant">Grant (given)</option>
      <option value="adjustment">Adjustment (a correction, may be negative)</option>
    </select>
    <label for="credit-amount">Credits</label>
    <input id="credit-amount" name="amount" type="number" step="1" required />
    <label for="credit-reason">Reason</label>
    <input id="credit-reason" name="reason" maxlength="500" required />
    <${ErrorNote} error=${error} />
    ${made ? html`<p class="hint" role="status" data-testid="credit-made">${`${made.type} of ${made.amount} recorded as ${made.ref}`}</p>` : null}
    <div class="actions"><button type="submit" class="primary" disabled=${busy}>Record</button></div>
  </form>`;
}

/**
 * The customer's credits: balance, this hour's spend, refill terms and the next refill, the
 * ledger, and the form that changes the balance (for a customer with credit terms); its times on
 * the clock of `timeZone`, the customer's.
 * @param {{ path: string, timeZone: string }} props
 */
export function CreditsPanel({ path, timeZone }) {
  const [version, setVersion] = useState(0);
  const [credits, error, reload] = usePolled(() => api('GET', `${path}/credits`), 15_000, [path, version]);
  const ledger = useLedger(path, version);
  const changed = () => {
    setVersion((v) => v + 1);
    reload();
  };
  return html`<section class="panel" aria-labelledby="credits-title" data-testid="customer-credits">
    <h2 id="credits-title">Credits</h2>
    <${ErrorNote} error=${error} />
    ${credits ? html`<${CreditsBody} path=${path} credits=${credits} ledger=${ledger} zone=${timeZone} onChanged=${changed} />` : error ? null : html`<p>Loading…</p>`}
  </section>`;
}

/**
 * The terms a customer's credits follow, as the dialog's fields give them: its plan's ('plan',
 * which drops terms of its own), none (null, which stops spending and keeps the balance and
 * ledger), or its own: a balance changed by hand only ({}) or a refill.
 * @param {FormData} form
 */
function termsOf(form) {
  const follow = form.get('follow');
  if (follow === 'none') return null;
  if (follow === 'plan') return 'plan';
  const amount = String(form.get('refillAmount') ?? '').trim();
  return amount ? { refill: { amount: Number(amount), every: String(form.get('every')) } } : {};
}

/**
 * Where the credit terms dialog opens: on the choice the record stands on, from its `ownCredits`
 * (terms of its own, null for none, absent for its plan's).
 * @param {unknown} own
 */
function standingOf(own) {
  if (own === undefined) return 'plan';
  return own === null ? 'none' : 'own';
}

/** The button and dialog that set a customer's credit terms (PATCH /admin/customers/:id {credits}). */
function CreditTerms({ path, terms, onChanged }) {
  // The record as read when the dialog opens: its own terms fill the refill fields.
  const [record, setRecord] = useState(/** @type {any} */ (null));
  const [error, setError] = useState(/** @type {any} */ (null));
  // Which terms the radios choose: the refill fields are the record's own terms, and say nothing
  // (so they are disabled) when its plan's or none are chosen.
  const [follow, setFollow] = useState('own');
  const close = () => setRecord(null);
  // Read again at each opening, not taken from the page: the page reads the customer once, and its
  // terms may have changed since (by this dialog, the CLI, another operator).
  const open = async () => {
    try {
      const current = await api('GET', path);
      setError(null);
      setFollow(standingOf(current.ownCredits));
      setRecord(current);
    } catch (err) {
      setError(err);
    }
  };
  // Its own terms when it has some; else those in force (its plan's), a start for terms of its own.
  const filled = record?.ownCredits ?? record?.credits;
  const every = filled?.refill?.every ?? 'period';
  const choice = (value, text) =>
    html`<label class="inline"><input type="radio" name="follow" value=${value} checked=${follow === value} onChange=${() => setFollow(value)} /> ${text}</label>`;
  return html`<div class="actions">
      <button type="button" onClick=${open}>${terms ? 'Change credit terms' : 'Give it credit terms'}</button>
    </div>
    <${ErrorNote} error=${error} />
    <${Confirm} open=${record !== null} title="Credit terms" confirmLabel="Save" onClose=${close}
      onConfirm=${async (form) => {
        await api('PATCH', path, { credits: termsOf(form) });
        close();
        onChanged();
      }}>
      <fieldset>
        <legend>Its keys spend credits on</legend>
        ${choice('own', 'terms of its own, below')}
        ${choice('plan', "its plan's terms (none if its plan has none)")}
        ${choice('none', 'none: they stop; the balance and ledger stay')}
      </fieldset>
      <label for="credit-refill-amount">Refill up to (empty: no refill)</label>
      <input id="credit-refill-amount" name="refillAmount" type="number" min="1" step="1" disabled=${follow !== 'own'} defaultValue=${filled?.refill?.amount ?? ''} />
      <label for="credit-refill-every">Every</label>
      <select id="credit-refill-every" name="every" disabled=${follow !== 'own'}>
        <option value="period" selected=${every === 'period'}>billing period</option>
        <option value="day" selected=${every === 'day'}>day (local midnight in its zone)</option>
      </select>
    <//>`;
}

/**
 * The credits panel's figures, form and ledger, once the balance is read; for a customer that never
 * had credits, one sentence instead (one whose terms were removed keeps its balance and ledger).
 */
function CreditsBody({ path, credits, ledger, zone, onChanged }) {
  const terms = html`<${CreditTerms} path=${path} terms=${credits.credits} onChanged=${onChanged} />`;
  if (!credits.credits && credits.balance === 0 && ledger.items.length === 0 && !ledger.error)
    return html`<p data-testid="credits-none">No credit terms: its keys spend no credits.</p>${terms}`;
  return html`
    ${
      outOfCredits(credits)
        ? html`<${Notice} data-testid="out-of-credits">
            <p><strong>Out of credits:</strong> every request of its keys is refused 402 <code>credits_exhausted</code>${
              credits.nextRefillAt
                ? `, until the refill at ${when(credits.nextRefillAt, zone)}`
                : ', and nothing refills the balance by itself'
            }.</p>
            <p>Top up: record a top-up in <strong>Add or take credits</strong> below, or <code>POST ${path}/credits</code>.</p>
          <//>`
        : null
    }
    <dl class="fields">
      <dt>balance</dt><dd data-testid="credits-balance">${credits.balance}</dd>
      <dt>this hour</dt><dd data-testid="credits-hour">${credits.openHour ? `${credits.openHour.spent} spent, in the ledger once the hour ends` : 'nothing spent'}</dd>
      <dt>refill</dt><dd data-testid="credits-refill">${refillText(credits.credits)}</dd>
      <dt>next refill</dt><dd>${when(credits.nextRefillAt, zone)}</dd>
    </dl>
    ${terms}
    ${credits.credits ? html`<${CreditChangeForm} path=${path} onChanged=${onChanged} />` : null}
    <h3>Ledger, newest first</h3>
    <${ErrorNote} error=${ledger.error} />
    <${DataTable} label="Credit ledger" testid="credits-ledger" columns=${['when', 'type', 'amount', 'detail', 'ref']}
      rows=${ledger.items.map((e) => [when(e.at, zone), e.type, e.amount > 0 ? `+${e.amount}` : String(e.amount), entryDetail(e, zone), e.ref ?? '—'])} />
    ${ledger.next ? html`<button type="button" onClick=${ledger.more}>Older entries</button>` : null}`;
}

/** An invoice line's cells: its name, what it says, its quantity, its amount. */
function lineCells(line, currency, locale) {
  const cash = (minor) => money(minor, currency, locale);
  if (line.line === 'overage')
    return [
      'overage units',
      `beyond those included, ${cash(line.unitPrice)} per ${line.per} started`,
      `${line.quantity} (billed ${line.billedUnits})`,
      cash(line.amount),
    ];
  if (line.line === 'credits')
    return ['credits used', 'prepaid credits spent (billed when bought)', String(line.quantity), cash(line.amount)];
  return [line.line, line.description, String(line.quantity), cash(line.amount)];
}

/** A link to a file made in the page (a blob), released when the link goes. */
function FileLink({ file, label }) {
  const [href, setHref] = useState(/** @type {string | null} */ (null));
  useEffect(() => {
    const url = URL.createObjectURL(new Blob([file.text], { type: 'text/csv' }));
    setHref(url);
    return () => URL.revokeObjectURL(url);
  }, [file.text]);
  return href
    ? html`<a href=${href} download=${file.name ?? 'invoice.csv'} data-testid="invoice-csv">${label}</a>`
    : null;
}

/**
 * The invoice preview of a customer, or of a key standing for itself, under its plan's price, for
 * this billing period so far or the one before (a customer's in its calendar, a lone key's the
 * UTC month): its lines and total as the admin API computes them, and the same as a CSV file.
 * `path` is the customer's or the key's, `timeZone` the one its periods are counted in.
 * @param {{ path: string, plan: string, timeZone: string, plans: import('./types.js').Plans['plans'], testid: string }} props
 */
export function InvoicePanel({ path, plan, timeZone, plans, testid }) {
  const [period, setPeriod] = useState(/** @type {'current' | 'previous'} */ ('current'));
  const priced = Boolean(plans.find((p) => p.name === plan)?.price);
  const [preview, error] = usePolled(
    async () => {
      if (!priced) return null;
      const query = `${path}/invoice-preview?period=${period}`;
      const [json, csv] = await Promise.all([api('GET', query), apiFile(`${query}&format=csv`)]);
      return { json: /** @type {import('./types.js').InvoicePreview} */ (json), csv };
    },
    30_000,
    [path, period, priced],
  );
  if (!priced)
    return html`<section class="panel" aria-labelledby="invoice-title" data-testid=${testid}>
      <h2 id="invoice-title">Invoice preview</h2>
      <p data-testid="invoice-unpriced">Plan ${plan} has no price, so there is no invoice to preview. Give it one in PLANS_FILE (plans.${plan}.price).</p>
    </section>`;
  const choose = (event) => setPeriod(event.currentTarget.value);
  const shown = preview && preview.json.period === period ? preview : null;
  const p = shown?.json;
  const locale = navigator.language;
  return html`<section class="panel" aria-labelledby="invoice-title" data-testid=${testid}>
    <h2 id="invoice-title">Invoice preview</h2>
    <fieldset class="period-choice">
      <legend>Billing period</legend>
      <label class="inline"><input type="radio" name="invoice-period" value="current" checked=${period === 'current'} onChange=${choose} /> this one, so far</label>
      <label class="inline"><input type="radio" name="invoice-period" value="previous" checked=${period === 'previous'} onChange=${choose} /> the one before</label>
    </fieldset>
    <${ErrorNote} error=${error} />
    ${
      p && shown
        ? html`<p data-testid="invoice-period">${periodText(p.from, p.to, timeZone)} (${timeZone}): ${p.units} units on plan ${p.plan}</p>
          <${DataTable} label="Invoice lines" testid="invoice-lines" columns=${['line', 'description', 'quantity', 'amount']}
            rows=${p.lines.map((l) => lineCells(l, p.currency, locale))} />
          <p class="invoice-total">Total <strong data-testid="invoice-total">${money(p.total, p.currency, locale)}</strong></p>
          <p><${FileLink} file=${shown.csv} label="Download as CSV" /></p>`
        : error
          ? null
          : html`<p>Loading…</p>`
    }
  </section>`;
}
