// @ts-check
// The leaks page: every proven leak, newest first (GET /admin/leaks), whoever reported it (the
// secret-scanning receiver or an operator), with what it did to the key; and the form to report
// a key found by hand (POST /admin/leaks), by the key or its SHA-256.

import { useState } from 'preact/hooks';
import { api, DataTable, ErrorNote, html, usePolled, when } from './ui.js';

/** What a leak did to its key, in words. */
function doneOf(leak) {
  if (leak.response === 'rotate' && leak.leakedSecretEndsAt) {
    return `rotated; the leaked secret works until ${when(leak.leakedSecretEndsAt)}`;
  }
  if (leak.response === 'rotate') return 'rotated';
  return leak.response === 'revoke' ? 'revoked' : 'notified only';
}

function ReportLeak({ onReported }) {
  const [error, setError] = useState(/** @type {Error | null} */ (null));
  const submit = async (event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const secret = String(form.get('secret') ?? '').trim();
    const body = /^[0-9a-f]{64}$/.test(secret) ? { sha256: secret } : { key: secret };
    body.source = form.get('source');
    if (form.get('url')) body.url = form.get('url');
    try {
      await api('POST', '/admin/leaks', body);
      setError(null);
      event.currentTarget?.reset();
      onReported();
    } catch (err) {
      setError(/** @type {Error} */ (err));
    }
  };
  return html`<form onSubmit=${submit} aria-label="Report a leaked key">
    <label for="leak-secret">Leaked key, or its SHA-256</label>
    <input id="leak-secret" name="secret" required autocomplete="off" spellcheck="false" />
    <label for="leak-source">Where it was found</label>
    <input id="leak-source" name="source" required placeholder="support ticket 4711" />
    <label for="leak-url">Link (optional)</label>
    <input id="leak-url" name="url" type="url" />
    <button type="submit">Report</button>
    <${ErrorNote} error=${error} />
  </form>`;
}

export function Leaks() {
  const [reloads, setReloads] = useState(0);
  const [leaks, error] = usePolled(
    () => /** @type {Promise<import('./types.js').LeakList>} */ (api('GET', '/admin/leaks?limit=100')),
    15_000,
    [reloads],
  );
  return html`<section aria-labelledby="leaks-title">
    <h1 id="leaks-title">Leaked keys</h1>
    <p class="hint">Proven leaks, newest first: reported by secret scanning or by hand, and what each did to its key.</p>
    <${ErrorNote} error=${error} />
    ${
      leaks && leaks.items.length === 0
        ? html`<p class="count">No leaked key has been reported.</p>`
        : html`<${DataTable} label="Leaked keys" testid="leaks-table"
            columns=${['reported', 'key', 'customer', 'by', 'found in', 'done']}
            rows=${(leaks?.items ?? []).map((l) => [
              when(l.reportedAt),
              html`<a href=${`#/keys/${l.keyId}`}>${l.keyId}</a>`,
              l.customerId ? html`<a href=${`#/customers/${l.customerId}`}>${l.customerId}</a>` : '—',
              l.reporter === 'github' ? 'secret scanning' : 'by hand',
              l.url ? html`<a href=${l.url} rel="noreferrer noopener">${l.source}</a>` : l.source,
              doneOf(l),
            ])} />`
    }
    <h2>Report a leaked key</h2>
    <${ReportLeak} onReported=${() => setReloads((n) => n + 1)} />
  </section>`;
}
