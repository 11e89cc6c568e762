// @ts-check
// The portal's invoice preview page: the signed-in customer's billing period under its plan's
// price, as the admin API computes it, with a CSV of the same lines. Amounts arrive as integers in
// the currency's minor units and are formatted from them as decimal text, never through a float.

import { DataTable } from '@shared/components.js';
import { count, money } from '@shared/format.js';
import { html } from '@shared/html.js';
import { useEffect, useState } from 'preact/hooks';
import { api, SIGNED_OUT, zone } from './account.js';

/** A day of the customer's own calendar: its billing period starts at its local midnight. */
const day = (ms, timeZone) =>
  new Date(ms).toLocaleDateString('en-GB', { timeZone, day: 'numeric', month: 'short', year: 'numeric' });

/** What each line says, in the customer's words; the quantity cell, and the amount cell. */
function lineCells(line, currency) {
  const cash = (minor) => money(minor, currency);
  switch (line.line) {
    case 'base':
      return ['Base fee for the billing period', '', cash(line.amount)];
    case 'included':
      return [line.description, `${count(line.quantity)} units`, cash(line.amount)];
    case 'overage':
      return [
        `Units beyond those included: ${cash(line.unitPrice)} per ${count(line.per)} started`,
        `${count(line.quantity)} units (billed as ${count(line.billedUnits)})`,
        cash(line.amount),
      ];
    default:
      return ['Prepaid credits used (paid when bought)', `${count(line.quantity)} credits`, cash(line.amount)];
  }
}

/** The preview of one period: what it covers, its lines and total, and the CSV of them. */
function Preview({ preview, period }) {
  const timeZone = zone();
  const to = Date.parse(preview.to) - 1;
  const covers = `${day(Date.parse(preview.from), timeZone)} to ${day(to, timeZone)} (${timeZone})${period === 'current' ? ', so far' : ''}: `;
  return html`<p id="invoice-period">${`${covers}${count(preview.units)} units on your ${preview.plan} plan.`}</p>
    <${DataTable} id="invoice-lines" label="Invoice lines" caption="What the billing period comes to" reflow=${false}
      columns=${['Line', { label: 'Quantity', num: true }, { label: 'Amount', num: true }]}
      rows=${preview.lines.map((line) => lineCells(line, preview.currency))}
      rowAttrs=${(i) => ({ 'data-line': preview.lines[i].line })}
      foot=${['Total', '', money(preview.total, preview.currency)]} footAttrs=${{ 'data-line': 'total' }} />
    <p class="muted">A preview of what the period comes to: the invoice itself is sent separately.</p>
    <p><a href=${`/portal/api/invoice-preview?period=${period}&format=csv`} download="">Download these lines as CSV</a></p>`;
}

/**
 * The period the form names (this one so far, or the one before); a plan without a price, or a
 * period the history no longer keeps, is said as the portal words it.
 * @param {{ portal: import('./portal.js').Portal }} props
 */
export function InvoicePage({ portal: _portal }) {
  const [period, setPeriod] = useState('current');
  const [shown, setShown] = useState(/** @type {{ preview?: any, message?: string, period: string } | null} */ (null));
  useEffect(() => {
    let live = true;
    api('GET', `/portal/api/invoice-preview?period=${period}`).then(
      (preview) => live && setShown({ preview, period }),
      // Signed out: the page already says so, in its status line.
      (err) => live && setShown(err.message === SIGNED_OUT ? null : { message: err.message, period }),
    );
    return () => {
      live = false;
    };
  }, [period]);
  const change = (event) => setPeriod(String(new FormData(event.currentTarget).get('period') ?? 'current'));
  return html`<section id="invoice" aria-labelledby="invoice-title">
    <h1 id="invoice-title">Invoice preview</h1>
    <form id="invoice-form" class="row" onChange=${change} onSubmit=${(e) => e.preventDefault()}>
      <fieldset><legend>Billing period</legend>
        <label><input type="radio" name="period" value="current" defaultChecked /> This one, so far</label>
        <label><input type="radio" name="period" value="previous" /> The one before</label>
      </fieldset>
    </form>
    <div id="invoice-body" aria-live="polite">${
      shown?.preview
        ? html`<${Preview} preview=${shown.preview} period=${shown.period} />`
        : shown?.message
          ? html`<p class="card">${shown.message}</p>`
          : null
    }</div>
  </section>`;
}
