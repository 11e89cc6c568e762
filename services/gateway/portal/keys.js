// @ts-check
// Your keys: how many the plan allows, a new one made, and a card per key to narrow, rotate or
// revoke it. Each change redraws the list before it is announced (portal.settled).

import { Card, Field, Notice } from '@shared/components.js';
import { html } from '@shared/html.js';
import { useEffect, useState } from 'preact/hooks';
import { ASK, api, when } from './account.js';

/** What a banned key is told: until when, why, and what ends it. */
function BanNotice({ k }) {
  return html`<${Notice} data-ban=${k.id}><p><strong>${`Banned until ${when(k.bannedUntil)}.`}</strong></p><p>${'Its clients kept sending requests after being answered 429 Too Many Requests, without waiting the '}<code>Retry-After</code>${' each answer gave, so every request with this key is refused 429 '}<code>api_key_banned</code>${' until then.'}</p><p>${`The ban ends by itself. Have your clients wait the Retry-After of each 429 so it does not happen again; to have it lifted sooner, ${ASK}.`}</p><//>`;
}

/** A secret shown this once, in the page's live region. */
function NewSecret({ secret }) {
  return html`<div id="new-secret" role="status">${
    secret
      ? html`<${Card} class="secret"><p>${secret.text}</p><output aria-label="The key">${secret.key}</output><p class="muted">It is shown this once: copy it now.</p><//>`
      : null
  }</div>`;
}

/** A key from the operator's API_KEYS_FILE: shown and counted, changed only in that file. */
function FileKeyCard({ k }) {
  return html`<${Card} data-key=${k.id} data-source="file">
    <h2>${k.name}</h2>
    <p class="muted">${`${k.id} · scopes ${k.scopes.join(', ') || 'none'} · created ${when(k.createdAt)}`}</p>
    <p>Managed in a file by your provider: read-only here; ask them to rotate, change or revoke it.</p>
  <//>`;
}

/**
 * A key the customer manages. Its fields start from the store's answer (the list is drawn anew
 * after each change) and are the browser's own until then.
 * @param {{ k: any, portal: import('./portal.js').Portal, onSecret: (s: { text: string, key: string }) => void }} props
 */
function KeyCard({ k, portal, onSecret }) {
  const [confirming, setConfirming] = useState(false);
  const { session, run, say, settled } = portal;
  const path = `/portal/api/keys/${encodeURIComponent(k.id)}`;
  const narrow = (event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget);
    const list = String(data.get('cidrs') ?? '')
      .split(',')
      .map((c) => c.trim())
      .filter(Boolean);
    run(async () => {
      await api('PATCH', path, { scopes: data.getAll('scope').map(String), allowedCidrs: list.length ? list : null });
      await settled(() => say(`Key “${k.name}” saved.`));
    });
  };
  const rotate = (event) => {
    const grace = /** @type {HTMLInputElement} */ (event.currentTarget.form.elements.namedItem('grace'));
    run(async () => {
      const rotated = await api('POST', `${path}/rotate`, { gracePeriodSeconds: Number(grace.value) });
      say('');
      await settled(() =>
        onSecret({
          text: `Key “${k.name}” rotated; the old secret works until ${when(rotated.previousKeyExpiresAt)}.`,
          key: rotated.key,
        }),
      );
    });
  };
  const revoke = () => {
    if (!confirming) return setConfirming(true);
    return run(async () => {
      await api('DELETE', path);
      await settled(() => say(`Key “${k.name}” revoked.`));
    });
  };
  const previous = k.previousKeyExpiresAt ? ` · previous secret works until ${when(k.previousKeyExpiresAt)}` : '';
  return html`<${Card} data-key=${k.id}>
    <h2>${k.name}</h2>
    <p class="muted">${`${k.id} · starts ${k.prefix ?? '—'}… · created ${when(k.createdAt)}${previous}`}</p>
    ${k.bannedUntil ? html`<${BanNotice} k=${k} />` : null}
    <p class="muted" data-key-windows=${k.id}>${'Its rate limits are your account’s: every request with it counts toward the windows all your keys share, and toward its own if it has limits of its own ('}<a href="#usage">Usage now</a>${' shows them).'}</p>
    <form class="row" onSubmit=${narrow}>
      <fieldset><legend>Scopes</legend>${session.scopes.map(
        (scope) =>
          html`<label><input type="checkbox" name="scope" value=${scope} defaultChecked=${k.scopes.includes(scope)} />${` ${scope}`}</label>`,
      )}</fieldset>
      <${Field} label="Allowed addresses (CIDRs, comma-separated)"><input name="cidrs" defaultValue=${(k.allowedCidrs ?? []).join(', ')} placeholder="any address" autocomplete="off" /><//>
      <button type="submit" class="secondary">Save</button>
    </form>
    <form class="actions" onSubmit=${(e) => e.preventDefault()}>
      <${Field} label="Grace (seconds)"><input type="number" name="grace" min="0" max=${session.grace.maxSeconds} defaultValue=${session.grace.defaultSeconds} /><//>
      <button type="button" class="primary" onClick=${rotate}>Rotate</button>
      <button type="button" class="danger" onClick=${revoke}>${confirming ? 'Confirm: revoke for good' : 'Revoke'}</button>
    </form>
  <//>`;
}

/** Minutes and seconds, for the time a leaked secret has left. */
function left(seconds) {
  const minutes = Math.floor(seconds / 60);
  return minutes > 0 ? `${minutes} min ${seconds % 60} s` : `${seconds} s`;
}

/**
 * The leaks of the customer's keys (docs/leaks.md): where each was found and what was done; after
 * a rotation, the successor's prefix, the time the leaked secret has left, and the successor
 * secret, given once.
 * @param {{ portal: import('./portal.js').Portal, onSecret: (s: { text: string, key: string }) => void }} props
 */
function LeakNotices({ portal, onSecret }) {
  const [leaks, setLeaks] = useState(/** @type {any[]} */ ([]));
  const { generation } = portal.keys;
  useEffect(() => {
    portal.run(async () => setLeaks((await api('GET', '/portal/api/leaks')).items));
  }, [generation]);
  const take = (leak) =>
    portal.run(async () => {
      const { key } = await api('POST', `/portal/api/leaks/${encodeURIComponent(leak.id)}/successor`);
      onSecret({ text: `The new secret of key “${leak.keyName}”: put it in place of the leaked one.`, key });
    });
  const current = leaks.filter((l) => l.response !== 'rotate' || (l.secondsLeft ?? 0) > 0);
  return html`<div id="leaks">${current.map(
    (l) =>
      html`<${Notice} data-leak=${l.id}><p><strong>${`Key “${l.keyName}” (${l.keyId}) was found leaked`}</strong>${` in ${l.source}${l.url ? ` (${l.url})` : ''}, reported ${when(l.reportedAt)}.`}</p>${
        l.response === 'rotate'
          ? html`<p>${`It has a new secret (it starts ${l.successorPrefix ?? 'ask_'}…). The leaked secret keeps working for ${left(l.secondsLeft)} more (until ${when(l.leakedSecretEndsAt)}), and its answers carry a Deprecation header; then it is refused.`}</p><button type="button" class="primary" onClick=${() => take(l)}>Show the new secret (once)</button>`
          : l.response === 'revoke'
            ? html`<p>It was revoked at once: create a new key for its clients.</p>`
            : html`<p>It still works: rotate or revoke it below.</p>`
      }<//>`,
  )}</div>`;
}

/** The form that makes a key; its secret is shown once, above the list. */
function CreateKey({ portal, onSecret }) {
  const create = (event) => {
    event.preventDefault();
    const form = /** @type {HTMLFormElement} */ (event.currentTarget);
    portal.run(async () => {
      const made = await api('POST', '/portal/api/keys', { name: String(new FormData(form).get('name')) });
      form.reset();
      portal.say('');
      await portal.settled(() => onSecret({ text: `Key “${made.name}” created.`, key: made.key }));
    });
  };
  return html`<form id="create-form" class="row" onSubmit=${create}>
    <${Field} label="Name"><input name="name" maxlength="100" required autocomplete="off" /><//>
    <button type="submit" class="primary">Create a key</button>
  </form>`;
}

/** @param {{ portal: import('./portal.js').Portal }} props */
export function KeysPage({ portal }) {
  const [secret, setSecret] = useState(/** @type {{ text: string, key: string } | null} */ (null));
  useEffect(() => {
    portal.run(portal.reloadKeys);
  }, []);
  const { items, generation } = portal.keys;
  return html`<section id="keys" aria-labelledby="keys-title">
    <h1 id="keys-title">Your keys</h1>
    <p id="keys-room">${items ? `${items.length} of ${portal.session.maxKeys} keys your plan allows.` : ''}</p>
    <${CreateKey} portal=${portal} onSecret=${setSecret} />
    <${LeakNotices} portal=${portal} onSecret=${setSecret} />
    <${NewSecret} secret=${secret} />
    <div id="keys-list">${(items ?? []).map((k) =>
      // Keyed by the list's reading: each redraw starts the card's fields from the store's answer.
      k.source === 'file'
        ? html`<${FileKeyCard} key=${`${k.id}:${generation}`} k=${k} />`
        : html`<${KeyCard} key=${`${k.id}:${generation}`} k=${k} portal=${portal} onSecret=${setSecret} />`,
    )}</div>
  </section>`;
}
