// @ts-check
// Usage over time: the customer's units, 429s and 402s per hour, day or billing period, of all its
// keys or one, on its own clock.

import { DataTable } from '@shared/components.js';
import { count } from '@shared/format.js';
import { html } from '@shared/html.js';
import { useEffect, useState } from 'preact/hooks';
import { api, when, zone } from './account.js';

function HistoryTable({ history }) {
  const most = Math.max(1, ...history.series.map((s) => s.units));
  const days = history.granularity !== 'hour';
  return html`<p>${`${count(history.totals.units)} units, ${count(history.totals.refused)} refused (429), ${count(history.totals.outOfCredits)} out of credits (402), from ${when(history.from)} to ${when(history.to)}.`}</p>
    <${DataTable} label="Units billed per step" caption="Units billed per step" reflow=${false}
      columns=${[`From (${zone()})`, { label: 'Units', num: true }, { label: 'Refused (429)', num: true }, { label: 'Out of credits (402)', num: true }, 'Share']}
      rows=${history.series.map((s) => [
        when(s.start, days),
        count(s.units),
        count(s.refused),
        count(s.outOfCredits),
        html`<meter min="0" max=${most} value=${s.units} aria-label=${`${s.units} units`}></meter>`,
      ])} />`;
}

/** @param {{ portal: import('./portal.js').Portal }} props */
export function HistoryPage({ portal }) {
  const [history, setHistory] = useState(/** @type {any} */ (null));
  /** @param {HTMLFormElement | null} form */
  const show = (form) =>
    portal.run(async () => {
      const data = form ? new FormData(form) : null;
      const query = new URLSearchParams({ granularity: String(data?.get('granularity') ?? 'hour') });
      if (data?.get('keyId')) query.set('keyId', String(data.get('keyId')));
      setHistory(await api('GET', `/portal/api/usage/history?${query}`));
    });
  useEffect(() => {
    show(null);
  }, []);
  const submit = (event) => {
    event.preventDefault();
    show(event.currentTarget);
  };
  return html`<section id="history" aria-labelledby="history-title">
    <h1 id="history-title">Usage over time</h1>
    <form id="history-form" class="row" onSubmit=${submit}>
      <div><label for="history-step">Step</label> <select id="history-step" name="granularity"><option value="hour">Hour</option><option value="day">Day</option><option value="period">Billing period</option></select></div>
      <div><label for="history-key">Keys</label> <select id="history-key" name="keyId"><option value="">All your keys</option>${(portal.keys.items ?? []).map((k) => html`<option value=${k.id}>${k.name}</option>`)}</select></div>
      <button type="submit" class="primary">Show</button>
    </form>
    <div id="history-table">${history ? html`<${HistoryTable} history=${history} />` : null}</div>
  </section>`;
}
