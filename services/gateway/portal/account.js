// @ts-check
// The signed-in customer as every page of the portal reads it: the portal API call (with the
// session's CSRF token; the session itself is an HttpOnly cookie this script never sees), and
// times on the customer's own clock.

/** @typedef {{ customer: { id: string, name: string, plan: string, billing: { timeZone: string } }, csrfToken: string, maxKeys: number, scopes: string[], grace: { defaultSeconds: number, maxSeconds: number } }} Session */

/** @type {Session | null} */
let session = null;
/** @type {(text: string) => void} */
let onSignedOut = () => {};

/**
 * The session the pages act in, and what to do when the portal says it is over.
 * @param {Session | null} current
 * @param {(text: string) => void} [signedOut]
 */
export function setSession(current, signedOut) {
  session = current;
  if (signedOut) onSignedOut = signedOut;
}

export const SIGNED_OUT = 'signed out';

/**
 * Calls the portal API; a 401 means the session is over.
 * @param {string} method
 * @param {string} url
 * @param {unknown} [body]
 * @returns {Promise<any>}
 */
export async function api(method, url, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = session?.csrfToken ?? '';
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    onSignedOut('Your session has ended. Ask for a new sign-in link where you came from.');
    throw new Error(SIGNED_OUT);
  }
  const data = res.status === 204 ? null : await res.json();
  if (!res.ok) throw new Error(data?.message ?? `The portal answered ${res.status}`);
  return data;
}

/** The customer's billing zone: every time on these pages is on its clock, and says so. */
export const zone = () => session?.customer.billing.timeZone ?? 'UTC';

/**
 * An instant on the customer's clock, the zone named; a day of its calendar (its column names the zone).
 * @param {string | null | undefined} iso
 */
export const when = (iso, dateOnly = false) =>
  iso
    ? `${new Date(iso).toLocaleString('en-GB', { timeZone: zone(), dateStyle: 'medium', ...(dateOnly ? {} : { timeStyle: 'short' }) })}${dateOnly ? '' : ` ${zone()}`}`
    : '—';

/** Where a customer asks for what the portal does not do itself (a top-up, a ban lifted early). */
export const ASK = 'ask the team that runs this API, who sent you the link to this portal';
