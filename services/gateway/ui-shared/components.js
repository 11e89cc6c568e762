// @ts-check
// The components the console and the portal are both drawn with: a table, a card, a notice, an
// error line and a labelled field. Plain preact + htm, no state of their own; base.css styles them.

import { html } from './html.js';

/**
 * @typedef {string | { label: string, num?: boolean }} Column a heading; `num` right-aligns the column
 */

/** @param {Column} c */
const columnLabel = (c) => (typeof c === 'string' ? c : c.label);
/** @param {Column | undefined} c */
const numClass = (c) => (c && typeof c !== 'string' && c.num ? 'num' : undefined);

/**
 * A table whose cells carry their column's name: with `reflow` (the default), on a narrow screen
 * each row becomes a block of "column value" lines (base.css), so nothing is cut off at 390 px;
 * without it the table scrolls in its own focusable region. The roles keep it a table for screen
 * readers once CSS no longer displays it as one. `foot` is a last row led by a row heading (a total).
 * @param {{
 *   label: string, columns: Column[], rows: any[][], testid?: string, id?: string, caption?: string,
 *   reflow?: boolean, rowAttrs?: (index: number) => Record<string, string | undefined>, foot?: any[],
 *   footAttrs?: Record<string, string>,
 * }} props
 */
export function DataTable({ label, testid, id, caption, columns, rows, reflow = true, rowAttrs, foot, footAttrs }) {
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label=${label}>
    <table class=${reflow ? 'reflow' : undefined} role="table" id=${id} data-testid=${testid}>
      ${caption ? html`<caption class="muted">${caption}</caption>` : null}
      <thead role="rowgroup"><tr role="row">${columns.map(
        (c) => html`<th scope="col" role="columnheader" class=${numClass(c)}>${columnLabel(c)}</th>`,
      )}</tr></thead>
      <tbody role="rowgroup">${rows.map(
        (cells, r) =>
          html`<tr role="row" ...${rowAttrs?.(r) ?? {}}>${cells.map(
            (cell, i) =>
              html`<td role="cell" class=${numClass(columns[i])} data-label=${columnLabel(columns[i] ?? '')}>${cell}</td>`,
          )}</tr>`,
      )}</tbody>
      ${
        foot
          ? html`<tfoot role="rowgroup"><tr role="row" ...${footAttrs ?? {}}>
              <th scope="row" role="rowheader">${foot[0]}</th>
              ${foot.slice(1).map((cell, i) => html`<td role="cell" class=${numClass(columns[i + 1])}>${cell}</td>`)}
            </tr></tfoot>`
          : null
      }
    </table>
  </div>`;
}

/**
 * A box of related figures or controls; any other attribute (an id, a data- mark) goes on it.
 * @param {{ class?: string, children?: any, [attr: string]: any }} props
 */
export function Card({ class: extra, children, ...attrs }) {
  return html`<div class=${extra ? `card ${extra}` : 'card'} ...${attrs}>${children}</div>`;
}

/**
 * A state that refuses requests (a ban, no credits left): what it is and what ends it, in a live
 * region so it is read out when it appears. Any other attribute goes on it.
 * @param {{ children?: any, [attr: string]: any }} props
 */
export function Notice({ children, ...attrs }) {
  return html`<div class="notice" role="status" ...${attrs}>${children}</div>`;
}

/**
 * What went wrong, read out at once; nothing without an error. `code` is the API's error code.
 * @param {{ error: { message: string, code?: string } | null | undefined }} props
 */
export function ErrorNote({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.message}${error.code ? ` (${error.code})` : ''}</p>`;
}

/**
 * A control with its label: the label wraps it, so it needs no id to be named.
 * @param {{ label: any, children?: any, class?: string }} props
 */
export function Field({ label, children, class: extra }) {
  return html`<label class=${extra}>${label} ${children}</label>`;
}
