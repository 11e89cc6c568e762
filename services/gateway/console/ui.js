// @ts-check
// What every page of the console shares: the admin API call, polling, dialogs, a secret shown once.
// The markup, tables, cards, notices and error lines are the ones the portal is drawn with too
// (services/gateway/ui-shared, served as /console/shared/).

import { ErrorNote } from '@shared/components.js';
import { html } from '@shared/html.js';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { when } from './figures.js';

export { Card, DataTable, ErrorNote, Notice } from '@shared/components.js';
export { html } from '@shared/html.js';
export { ahead, utcInstant, when } from './figures.js';
export const TOKEN = 'animal-store-admin-token';

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string | undefined} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * Calls the admin API with the signed-in token; the answer's JSON, null for a 204.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {Record<string, string>} [headers] more headers (an Idempotency-Key)
 * @returns {Promise<any>}
 */
export async function api(method, path, body, headers = {}) {
  const token = sessionStorage.getItem(TOKEN);
  const res = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (res.status === 204) return null;
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, data.code, data.message ?? `${res.status}`);
  return data;
}

/**
 * A file the admin API answers (a CSV), read with the token, which a plain link could not send:
 * its text and the name its Content-Disposition gives.
 * @param {string} path
 * @returns {Promise<{ text: string, name: string | null }>}
 */
export async function apiFile(path) {
  const res = await fetch(path, { headers: { authorization: `Bearer ${sessionStorage.getItem(TOKEN)}` } });
  if (!res.ok) {
    const data = await res.json().catch(() => ({}));
    throw new ApiError(res.status, data.code, data.message ?? `${res.status}`);
  }
  const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? null;
  return { text: await res.text(), name };
}

/**
 * Reloads `load` every `ms` while mounted; returns [data, error, reload].
 * @template T
 * @param {() => Promise<T>} load
 * @param {number} ms
 * @param {unknown[]} deps
 * @returns {[T | null, ApiError | null, () => void]}
 */
export function usePolled(load, ms, deps) {
  const [state, setState] = useState(
    /** @type {{ data: T | null, error: ApiError | null }} */ ({ data: null, error: null }),
  );
  // Bumped whenever deps change: an answer to what was asked before (a search as it was two
  // keystrokes ago, answered last) is dropped, not shown over the current one.
  const generation = useRef(0);
  const reload = useCallback(() => {
    const asked = generation.current;
    load().then(
      (data) => asked === generation.current && setState({ data, error: null }),
      (error) => asked === generation.current && setState((s) => ({ data: s.data, error })),
    );
  }, deps);
  useEffect(() => {
    generation.current += 1;
    reload();
    if (!ms) return undefined;
    const timer = setInterval(reload, ms);
    return () => clearInterval(timer);
  }, [reload, ms]);
  return [state.data, state.error, reload];
}

/**
 * A modal that asks before an action; the dialog element traps focus and Escape closes it.
 * `children` is the form's fields; `onConfirm` runs the action and may show its result. It is
 * built anew each time it opens, so its fields start from their defaults, not from what was typed
 * the last time it was cancelled or sent.
 */
export function Confirm(props) {
  return props.open ? html`<${ConfirmDialog} ...${props} />` : null;
}

function ConfirmDialog({ title, confirmLabel, danger, onConfirm, onClose, children }) {
  const ref = useRef(/** @type {HTMLDialogElement | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
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
export function SecretOnce({ secret, what, label = 'API key', onDone }) {
  const ref = useRef(/** @type {HTMLDialogElement | null} */ (null));
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
    <label for="secret">${label}</label>
    <input id="secret" readonly value=${secret} data-testid="secret" onFocus=${(e) => e.currentTarget.select()} />
    <div class="actions">
      <button type="button" onClick=${copy}>${copied ? 'Copied' : 'Copy'}</button>
      <button type="button" class="primary" onClick=${() => ref.current?.close()}>Done</button>
    </div>
  </dialog>`;
}

/** Each customer's billing zone as last read, by id: `zone` null until its answer is in. */
/** @type {Map<string, { zone: string | null, read: Promise<void> }>} */
const zones = new Map();

/**
 * Notes a customer's zone as its own page read it, so the lists show its times on the same clock.
 * @param {string} id
 * @param {string} zone
 */
export function rememberZone(id, zone) {
  zones.set(id, { zone, read: Promise.resolve() });
}

/**
 * The billing zones of the customers these rows belong to, each read once (GET
 * /admin/customers/:id) and kept for the page's life: `zoneOf(customerId)` is the customer's zone,
 * UTC for no customer (a lone key, a deleted customer), null while its answer is on the way.
 * @param {Array<string | undefined | null>} customerIds
 * @returns {(customerId: string | undefined | null) => string | null}
 */
export function useZones(customerIds) {
  const [, setRead] = useState(0);
  const ids = [...new Set(customerIds.filter((id) => typeof id === 'string'))];
  useEffect(() => {
    let live = true;
    for (const id of ids) {
      if (zones.has(id)) continue;
      const entry = { zone: /** @type {string | null} */ (null), read: Promise.resolve() };
      entry.read = api('GET', `/admin/customers/${encodeURIComponent(id)}`).then(
        (customer) => {
          entry.zone = customer.billing.timeZone;
        },
        () => {
          entry.zone = 'UTC';
        },
      );
      zones.set(id, entry);
    }
    Promise.all(ids.map((id) => zones.get(id)?.read)).then(() => live && setRead((n) => n + 1));
    return () => {
      live = false;
    };
  }, [ids.join(' ')]);
  return (customerId) => (customerId ? (zones.get(customerId)?.zone ?? null) : 'UTC');
}

/**
 * An instant on a clock that may not be known yet (a customer's zone on its way): `…` meanwhile.
 * @param {string | null | undefined} iso
 * @param {string | null} zone
 */
export function whenIn(iso, zone) {
  return zone === null && iso ? '…' : when(iso, zone ?? 'UTC');
}
