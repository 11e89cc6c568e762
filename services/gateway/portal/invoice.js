// @ts-check
// The portal's invoice preview page: the signed-in customer's billing period under its plan's
// price, as the admin API computes it, with a CSV of the same lines. Amounts arrive as integers in
// the currency's minor units and are formatted from them as decimal text, never through a float.

import { money } from './money.js';

const count = (n) => n.toLocaleString('en-US');

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

/**
 * The preview's table: one row per line, the total in the footer.
 * @param {(tag: string, attrs?: object, ...children: any[]) => HTMLElement} h
 */
function invoiceTable(h, preview) {
  const row = (cells, head = false) =>
    h(
      'tr',
      { 'data-line': head ? 'total' : undefined },
      h(head ? 'th' : 'td', head ? { scope: 'row' } : {}, cells[0]),
      h('td', { class: 'num' }, cells[1]),
      h('td', { class: 'num' }, cells[2]),
    );
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { id: 'invoice-lines' },
      h('caption', { class: 'muted' }, 'What the billing period comes to'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Line'),
          h('th', { scope: 'col', class: 'num' }, 'Quantity'),
          h('th', { scope: 'col', class: 'num' }, 'Amount'),
        ),
      ),
      h(
        'tbody',
        {},
        preview.lines.map((line) => {
          const tr = row(lineCells(line, preview.currency));
          tr.dataset.line = line.line;
          return tr;
        }),
      ),
      h('tfoot', {}, row(['Total', '', money(preview.total, preview.currency)], true)),
    ),
  );
}

/**
 * Shows the preview of the period the form names (this one so far, or the one before) in
 * #invoice-body; a plan without a price, or a period the history no longer keeps, is said as the
 * portal words it.
 * @param {(method: string, url: string) => Promise<any>} api
 * @param {(tag: string, attrs?: object, ...children: any[]) => HTMLElement} h
 * @param {string} timeZone the customer's billing zone
 */
export async function showInvoice(api, h, timeZone) {
  const form = /** @type {HTMLFormElement} */ (document.getElementById('invoice-form'));
  const place = /** @type {HTMLElement} */ (document.getElementById('invoice-body'));
  const period = String(new FormData(form).get('period') ?? 'current');
  let preview;
  try {
    preview = await api('GET', `/portal/api/invoice-preview?period=${period}`);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // Signed out: the page already says so, in its status line.
    place.replaceChildren(...(message === 'signed out' ? [] : [h('p', { class: 'card' }, message)]));
    return;
  }
  const to = Date.parse(preview.to) - 1;
  place.replaceChildren(
    h(
      'p',
      { id: 'invoice-period' },
      `${day(Date.parse(preview.from), timeZone)} to ${day(to, timeZone)} (${timeZone})${period === 'current' ? ', so far' : ''}: `,
      `${count(preview.units)} units on your ${preview.plan} plan.`,
    ),
    invoiceTable(h, preview),
    h('p', { class: 'muted' }, 'A preview of what the period comes to: the invoice itself is sent separately.'),
    h(
      'p',
      {},
      h(
        'a',
        { href: `/portal/api/invoice-preview?period=${period}&format=csv`, download: '' },
        'Download these lines as CSV',
      ),
    ),
  );
}
