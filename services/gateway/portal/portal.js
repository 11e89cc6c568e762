// @ts-check
// The customers' portal: preact + htm like the console, drawn with the components and base
// stylesheet the two share (services/gateway/ui-shared, served as /portal/shared/). One component
// per page (usage.js, history.js, keys.js, invoice.js), each section of a page its own component.

import { html } from '@shared/html.js';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, SIGNED_OUT, setSession } from './account.js';
import { HistoryPage } from './history.js';
import { InvoicePage } from './invoice.js';
import { KeysPage } from './keys.js';
import { UsagePage } from './usage.js';

/** Each page by its hash: its link in the nav, its heading (the tab's title) and its component. */
const PAGES = {
  usage: { link: 'Usage now', title: 'Usage now', Page: UsagePage },
  history: { link: 'Over time', title: 'Usage over time', Page: HistoryPage },
  keys: { link: 'Keys', title: 'Your keys', Page: KeysPage },
  invoice: { link: 'Invoice', title: 'Invoice preview', Page: InvoicePage },
};

const pageOf = () => (location.hash.slice(1) in PAGES ? location.hash.slice(1) : 'usage');

/** The page's hash route, followed as it changes. */
function usePage() {
  const [page, setPage] = useState(pageOf);
  useEffect(() => {
    const onHash = () => setPage(pageOf());
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  return page;
}

/**
 * What every page acts through.
 * @typedef {{
 *   session: import('./account.js').Session,
 *   run: (action: () => Promise<unknown>) => Promise<void>,
 *   say: (text: string, isError?: boolean) => void,
 *   keys: { items: any[] | null, generation: number },
 *   reloadKeys: () => Promise<void>,
 *   settled: (announce: () => void) => Promise<void>,
 * }} Portal
 */

function App() {
  const [session, setCurrent] = useState(/** @type {import('./account.js').Session | null} */ (null));
  const [status, setStatus] = useState({ text: 'Loading your account…', isError: false });
  // The key list, redrawn whole (its forms from the store's answer) each time it is read again.
  const [keys, setKeys] = useState({ items: /** @type {any[] | null} */ (null), generation: 0 });
  const page = usePage();
  const say = (text, isError = false) => setStatus({ text, isError });
  const signedOut = (text) => {
    setSession(null);
    setCurrent(null);
    say(text);
  };
  setSession(session, signedOut);
  const run = async (action) => {
    try {
      await action();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (message !== SIGNED_OUT) say(message, true);
    }
  };
  const reloadKeys = async () => {
    const { items } = await api('GET', '/portal/api/keys');
    setKeys((k) => ({ items, generation: k.generation + 1 }));
  };
  /**
   * Redraws the key list, then says what was done: a change is announced once the list shows it,
   * so an edit made after the announcement is not redrawn away. The announcement (a secret shown
   * once among them) comes even if the redraw fails.
   */
  const settled = async (announce) => {
    try {
      await reloadKeys();
    } finally {
      announce();
    }
  };

  useEffect(() => {
    api('GET', '/portal/api/session').then(
      (current) => {
        setSession(current);
        setCurrent(current);
        say('');
        // The key list fills the history page's choice of keys; the keys page reads it itself.
        if (pageOf() !== 'keys') run(reloadKeys);
      },
      (err) => err.message !== SIGNED_OUT && say(err.message, true),
    );
  }, []);
  useEffect(() => {
    if (!session) return;
    say('');
    document.title = `${PAGES[page].title} · ${session.customer.name}`;
  }, [page, session]);

  const signOut = () =>
    run(async () => {
      await api('POST', '/portal/api/sign-out');
      signedOut('You have signed out.');
    });
  const { Page } = PAGES[page];
  /** @type {Portal | null} */
  const portal = session && { session, run, say, keys, reloadKeys, settled };
  return html`<header>
      <span class="brand">Animal store API</span>
      ${
        session
          ? html`<nav aria-label="Portal">${Object.entries(PAGES).map(
              ([name, p]) =>
                html`<a href=${`#${name}`} aria-current=${name === page ? 'page' : undefined}>${p.link}</a>`,
            )}</nav>
            <button type="button" onClick=${signOut}>Sign out</button>`
          : null
      }
    </header>
    <main id="main" tabindex="-1">
      <p id="status" role="status" class=${status.isError ? 'error' : undefined} hidden=${status.text === ''}>${status.text}</p>
      ${portal ? html`<${Page} key=${page} portal=${portal} />` : null}
    </main>`;
}

const root = /** @type {HTMLElement} */ (document.getElementById('app'));
// The static "Loading" line goes: preact appends to what it did not render itself.
root.textContent = '';
render(html`<${App} />`, root);
