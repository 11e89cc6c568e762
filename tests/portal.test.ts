import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { copyFile, mkdir } from 'node:fs/promises';
import { createServer, type IncomingMessage, request } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry } from '@animal-store/common/metrics.js';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '@animal-store/gateway/test/support/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from './support/redis.js';
import { which } from './support/runtime.js';

/**
 * The customers' portal in a real headless Chromium (Debian's), against a gateway on a real Redis
 * in front of the pets service: a customer signs in from a fresh portal session made by the admin
 * API, reads its quotas, its credits and their ledger (a top-up by the admin API appearing in it)
 * and its usage over time, creates, rotates, narrows and revokes keys, and
 * signs out; a second customer's session is refused everything of the first's; axe-core on every
 * page; screenshots at 1280 and 390 px in reports/portal/, the docs' copies in docs/images/.
 */

const SHOTS = join(process.cwd(), 'reports', 'portal');
const DOC_IMAGES = join(process.cwd(), 'docs', 'images');
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let redis: TestRedis;
let pets: ReturnType<typeof buildPets>;
let gateway: TestGateway;
let browser: Browser;
let adminUrl: string;
let portalOrigin: string;
/** The gateway's log lines, for the portal's audit lines. */
const logs: Record<string, unknown>[] = [];

/**
 * The spec's four plans as they are built in, and one with a price for the invoice page: a base
 * fee of 49.00 EUR for 10 units, then 0.50 EUR for every 4 units started beyond them.
 */
function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'portal-plans-')), 'plans.json');
  const plans = {
    free: { windows: { minute: 60, day: 1000 } },
    pro: { windows: { minute: 300, day: 10000 } },
    business: { windows: { minute: 1000, day: 100000 } },
    enterprise: {},
    metered: {
      windows: { minute: 300, day: 10000 },
      price: { currency: 'EUR', base: 4900, includedUnits: 10, unitPrice: 50, per: 4 },
    },
  };
  writeFileSync(path, JSON.stringify({ plans }));
  return path;
}

beforeAll(async () => {
  const binary = which('chromium') ?? '/usr/bin/chromium';
  redis = await startRedis();
  pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: createRegistry('pets', false) });
  await pets.listen({ host: '127.0.0.1', port: 0 });
  gateway = await startGateway({
    redisUrl: redis.url,
    upstream: `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`,
    // Each refusal counts toward a ban for the whole of its Retry-After.
    env: { PLANS_FILE: plansFile(), BAN_GRACE_MS: '0' },
    logs,
  });
  await gateway.listen();
  await gateway.admin.listen({ host: '127.0.0.1', port: 0 });
  await gateway.portal.listen({ host: '127.0.0.1', port: 0 });
  adminUrl = `http://127.0.0.1:${(gateway.admin.server.address() as AddressInfo).port}`;
  portalOrigin = `http://127.0.0.1:${(gateway.portal.server.address() as AddressInfo).port}`;
  await mkdir(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: binary, args: ['--no-sandbox', '--disable-gpu'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await pets?.close();
  await redis?.stop();
});

async function adminPost(path: string, body?: unknown): Promise<Record<string, string>> {
  const res = await fetch(`${adminUrl}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as Record<string, string>;
}

async function adminGet<T = Record<string, unknown>>(path: string): Promise<T> {
  const res = await fetch(`${adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

/** The status of a GET sent from `localAddress` (another loopback address than fetch's 127.0.0.1). */
async function getFrom(localAddress: string, url: string, headers: Record<string, string>): Promise<number> {
  const req = request(url, { localAddress, headers });
  req.end();
  const [res] = (await once(req, 'response')) as [IncomingMessage];
  res.resume();
  await once(res, 'end');
  return res.statusCode ?? 0;
}

/** A fresh sign-in link on this test's portal listener (PORTAL_URL names the deployment's). */
async function portalLink(customerId: string): Promise<string> {
  const { url } = await adminPost(`/admin/customers/${customerId}/portal-sessions`);
  const { pathname, search } = new URL(url as string);
  return `${portalOrigin}${pathname}${search}`;
}

/** Serious and critical accessibility violations axe-core finds on the page as it is now. */
async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern.
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: {
          run(): Promise<{ violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }> }>;
        };
      }
    ).axe;
    return axe.run();
  });
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

async function shoot(page: Page, name: string, forDocs = false): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  if (forDocs) await copyFile(path, join(DOC_IMAGES, `portal-${name}.png`));
}

/** The operator's own application, on another site than the portal: one page linking into it. */
async function startOperatorApp(link: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><html lang="en"><title>Operator</title><a href="${link}">Manage your API keys</a></html>`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://localhost:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A request the page's own script could make, with the session's CSRF token: its status. */
async function fromPage(page: Page, method: string, url: string, body?: unknown): Promise<number> {
  const json = body === undefined ? 'undefined' : JSON.stringify(JSON.stringify(body));
  return page.evaluate(
    `(async () => {
      const session = await (await fetch('/portal/api/session')).json();
      const headers = { 'x-csrf-token': session.csrfToken };
      if (${json} !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(${JSON.stringify(url)}, { method: ${JSON.stringify(method)}, headers, body: ${json} });
      return res.status;
    })()`,
  );
}

describe('the portal (its own listener)', () => {
  it('signs a customer in from a fresh link, walks its usage and keys accessibly at 1280 and 390 px, refuses another customer, signs out', {
    timeout: 180_000,
  }, async () => {
    const alpha = await adminPost('/admin/customers', {
      name: 'Alpha Pets Ltd',
      plan: 'pro',
      credits: { refill: { amount: 1000, every: 'period' } },
    });
    // With a minute limit of its own beside the customer's shared windows.
    const made = await adminPost('/admin/keys', {
      customerId: alpha.id,
      name: 'production',
      limits: { perMinute: 100 },
    });
    for (let i = 0; i < 7; i++) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${made.key}` } });
      expect(res.status).toBe(200);
    }
    const link = await portalLink(alpha.id as string);

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const cspViolations: string[] = [];
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    const entered = await page.goto(link);
    expect(page.url()).toBe(`${portalOrigin}/portal`);
    expect(entered?.headers()['content-security-policy']).toContain("script-src 'self'");
    const cookies = await context.cookies();
    expect(cookies).toEqual([
      expect.objectContaining({ name: 'portal_session', httpOnly: true, sameSite: 'Strict', path: '/portal' }),
    ]);
    expect(await page.evaluate('document.cookie')).toBe('');

    // Usage now: the customer's shared windows and this billing period's units.
    await page.getByRole('heading', { name: 'Usage now' }).waitFor();
    await page.getByText('7 units billed this billing period').waitFor();
    await page.getByText('7 of 300 used, 293 left').waitFor();
    // The key's own window, which the shared ones do not show.
    const ownQuota = page.locator(`[data-key-quota="${made.id}"]`);
    await ownQuota.getByRole('heading', { name: 'Key “production”' }).waitFor();
    await ownQuota.getByRole('heading', { name: 'Per minute' }).waitFor();
    await ownQuota.getByText('7 of 100 used, 93 left').waitFor();
    expect(await page.locator('[data-key-quota]').count()).toBe(1);
    // Its credits: the period's refill, less the 7 requests; then a top-up made through the admin
    // API shows at the head of the ledger, and in the balance, once the page is read again.
    await page.getByText('993 credits left').waitFor();
    const ledgerRows = page.locator('#credits tbody tr');
    await expect
      .poll(() => ledgerRows.allTextContents())
      .toEqual([expect.stringMatching(/Refill\s*\+1,000\s*For the billing period/)]);
    await adminPost(`/admin/customers/${alpha.id}/credits`, { amount: 500, reason: 'Order 1234' });
    await page.getByRole('link', { name: 'Over time' }).click();
    await page.getByRole('link', { name: 'Usage now' }).click();
    await page.getByText('1,493 credits left').waitFor();
    await expect
      .poll(() => ledgerRows.allTextContents())
      .toEqual([expect.stringMatching(/Top-up\s*\+500\s*Order 1234/), expect.stringMatching(/Refill\s*\+1,000/)]);
    expect(await page.getByRole('button', { name: 'Older entries' }).isVisible()).toBe(false);
    // Nothing on it changes a balance: the customer reads its credits, the operator sets them.
    expect(await page.locator('#credits').getByRole('textbox').count()).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'usage-1280', true);
    await page.locator('#credits').screenshot({ path: join(SHOTS, 'credits-1280.png') });
    await copyFile(join(SHOTS, 'credits-1280.png'), join(DOC_IMAGES, 'portal-credits-1280.png'));

    // Paged, newest first: ten more entries push the first ones to a second page.
    for (let i = 1; i <= 10; i++) {
      await adminPost(`/admin/customers/${alpha.id}/credits`, { amount: i, reason: `Goodwill ${i}`, type: 'grant' });
    }
    await page.reload();
    await page.getByText('1,548 credits left').waitFor();
    await expect.poll(() => ledgerRows.count()).toBe(10);
    expect(await ledgerRows.first().textContent()).toMatch(/Credits given\s*\+10\s*Goodwill 10/);
    await page.getByRole('button', { name: 'Older entries' }).click();
    await expect.poll(() => ledgerRows.count()).toBe(12);
    expect(await ledgerRows.last().textContent()).toMatch(/Refill\s*\+1,000/);
    expect(await page.getByRole('button', { name: 'Older entries' }).isVisible()).toBe(false);

    // Over time, by hour then by day, all keys and the one key.
    await page.getByRole('link', { name: 'Over time' }).click();
    await page.getByRole('heading', { name: 'Usage over time' }).waitFor();
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('7 units, 0 refused').waitFor();
    await page.getByLabel('Step', { exact: true }).selectOption('day');
    await page.getByLabel('Keys', { exact: true }).selectOption({ label: 'production' });
    await page.getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => page.locator('#history-table tbody tr').count()).toBeGreaterThan(20);
    await page.getByText('7 units, 0 refused').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'history-1280', true);
    // By billing period, all keys: what the page shows is the admin API's history of the customer.
    await page.getByLabel('Step', { exact: true }).selectOption('period');
    await page.getByLabel('Keys', { exact: true }).selectOption({ label: 'All your keys' });
    await page.getByRole('button', { name: 'Show' }).click();
    const byPeriod = await adminGet<{
      totals: { units: number; refused: number };
      series: Array<{ start: string; units: number; refused: number }>;
    }>(`/admin/customers/${alpha.id}/usage/history?granularity=period`);
    expect(byPeriod.series.length).toBeGreaterThan(0);
    const periodRows = page.locator('#history-table tbody tr');
    await expect.poll(() => periodRows.count()).toBe(byPeriod.series.length);
    await page
      .getByText(
        `${byPeriod.totals.units} units, ${byPeriod.totals.refused} refused (429), 0 out of credits (402), from `,
      )
      .waitFor();
    // Each row: the period's first day as the page writes dates (in the browser's own Intl), its
    // units and its refusals.
    const starts = await page.evaluate(
      (isos) => isos.map((iso) => new Date(iso).toLocaleString('en-GB', { timeZone: 'UTC', dateStyle: 'medium' })),
      byPeriod.series.map((s) => s.start),
    );
    const shown = [];
    for (const row of await periodRows.all()) shown.push((await row.locator('td').allTextContents()).slice(0, 3));
    expect(shown).toEqual(byPeriod.series.map((s, i) => [starts[i], String(s.units), String(s.refused)]));
    expect(await axeViolations(page)).toEqual([]);

    // Keys: create one, rotate the first, narrow it, revoke the new one.
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('heading', { name: 'Your keys' }).waitFor();
    await page.getByText('1 of 5 keys your plan allows.').waitFor();
    await page.getByLabel('Name').fill('ci');
    await page.getByRole('button', { name: 'Create a key' }).click();
    await page.getByText('Key “ci” created.').waitFor();
    const secret = await page.getByLabel('The key').textContent();
    expect(secret).toMatch(/^ask_/);
    const ciStatus = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${secret}` } });
    expect(ciStatus.status).toBe(200);
    await page.getByText('2 of 5 keys your plan allows.').waitFor();

    const production = page.locator(`[data-key="${made.id}"]`);
    await production.getByLabel('Grace (seconds)').fill('600');
    await production.getByRole('button', { name: 'Rotate' }).click();
    await page.getByText('Key “production” rotated').waitFor();
    const rotated = await page.getByLabel('The key').textContent();
    for (const key of [made.key, rotated]) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(200);
    }
    await page.locator(`[data-key="${made.id}"]`).getByLabel('pets:write').uncheck();
    await page.locator(`[data-key="${made.id}"]`).getByRole('button', { name: 'Save' }).click();
    await page.getByText('Key “production” saved.').waitFor();
    const post = await fetch(`${gateway.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rotated}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Rex', categoryId: 1 }),
    });
    expect(post.status).toBe(403);
    // Its allowed addresses, set in the page: the key is then refused from any other address and
    // admitted from one on the list. The test's requests come from two loopback addresses (the
    // gateway sees the peer's, with no TRUST_PROXY), 127.0.0.1 by default and 127.0.0.2 bound.
    await page.locator(`[data-key="${made.id}"]`).getByLabel('Allowed addresses').fill('127.0.0.2/32');
    await page.locator(`[data-key="${made.id}"]`).getByRole('button', { name: 'Save' }).click();
    await expect
      .poll(async () => (await adminGet<{ allowedCidrs?: string[] }>(`/admin/keys/${made.id}`)).allowedCidrs)
      .toEqual(['127.0.0.2/32']);
    // The page shows the list it saved, as the store now has it.
    await expect
      .poll(() => page.locator(`[data-key="${made.id}"]`).getByLabel('Allowed addresses').inputValue())
      .toBe('127.0.0.2/32');
    const elsewhere = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${rotated}` } });
    expect(elsewhere.status).toBe(403);
    expect(((await elsewhere.json()) as { code: string }).code).toBe('ip_not_allowed');
    expect(await getFrom('127.0.0.2', `${gateway.url}/v1/pets`, { authorization: `Bearer ${rotated}` })).toBe(200);
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'keys-1280', true);

    const ci = page.locator('[data-key]', { hasText: 'ci' }).filter({ has: page.getByRole('heading', { name: 'ci' }) });
    await ci.getByRole('button', { name: 'Revoke' }).click();
    await ci.getByRole('button', { name: 'Confirm: revoke for good' }).click();
    await page.getByText('Key “ci” revoked.').waitFor();
    await page.getByText('1 of 5 keys your plan allows.').waitFor();
    const revoked = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${secret}` } });
    expect(revoked.status).toBe(401);

    // Readable at 390 px: nothing wider than the screen on any page.
    await page.setViewportSize({ width: 390, height: 844 });
    for (const name of ['usage', 'history', 'keys']) {
      await page.goto(`${portalOrigin}/portal#${name}`);
      await page.locator(`#${name}:not([hidden]) h1`).waitFor();
      await page.waitForLoadState('networkidle');
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      expect(await axeViolations(page)).toEqual([]);
      await shoot(page, `${name}-390`, name === 'usage');
    }

    // A second customer comes as customers do: from the operator's own application, another site
    // (localhost, where the portal is 127.0.0.1), by a link. SameSite=Strict keeps the cookie off
    // that cross-site navigation, but the page's own requests carry it.
    const beta = await adminPost('/admin/customers', { name: 'Beta Birds', plan: 'free' });
    const operatorApp = await startOperatorApp(await portalLink(beta.id as string));
    const other = await (await browser.newContext()).newPage();
    try {
      await other.goto(operatorApp.url);
      await other.getByRole('link', { name: 'Manage your API keys' }).click();
      await other.getByRole('heading', { name: 'Usage now' }).waitFor();
      await other.getByText('0 units billed this billing period').waitFor();
      // Beta has no credit terms: no credits on its page.
      expect(await other.locator('#credits').isHidden()).toBe(true);
    } finally {
      await operatorApp.close();
    }
    for (const [method, url, body] of [
      ['POST', `/portal/api/keys/${made.id}/rotate`, {}],
      ['PATCH', `/portal/api/keys/${made.id}`, { scopes: ['pets:read'] }],
      ['DELETE', `/portal/api/keys/${made.id}`, undefined],
      ['GET', `/portal/api/usage/history?keyId=${made.id}`, undefined],
      ['POST', '/portal/api/keys', { name: 'for alpha', customerId: alpha.id }],
    ] as const) {
      expect(await fromPage(other, method, url, body), `${method} ${url}`).toBe(404);
    }
    await other.goto(`${portalOrigin}/portal#keys`);
    await other.getByText('0 of 5 keys your plan allows.').waitFor();
    expect(await other.locator('[data-key]').count()).toBe(0);
    // Alpha's link, already used, signs nobody in.
    const reused = await other.goto(link);
    expect(reused?.status()).toBe(404);

    // Sign-out ends the session: the page says so and the cookie no longer opens anything.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You have signed out.').waitFor();
    expect(await page.evaluate("fetch('/portal/api/session').then((r) => r.status)")).toBe(401);
    await page.goto(`${portalOrigin}/portal`);
    await page.getByText('Your session has ended.').waitFor();
    await shoot(page, 'signed-out-390');
    expect(cspViolations).toEqual([]);
    await context.close();
  });

  it('shows a customer the invoice preview of its billing periods, as numbers and a CSV, and refuses it to another customer', {
    timeout: 120_000,
  }, async () => {
    // Billed from today's date (at most the 28th) in UTC: the period before is whole in the history.
    const anchorDay = Math.min(new Date().getUTCDate(), 28);
    const gamma = await adminPost('/admin/customers', {
      name: 'Gamma Geckos',
      plan: 'metered',
      billing: { anchorDay, timeZone: 'UTC' },
      credits: { refill: { amount: 1000, every: 'period' } },
    });
    const made = await adminPost('/admin/keys', { customerId: gamma.id, name: 'geckos' });
    // 13 units, each paid by a credit: none included nor overage, the base fee alone (billing.md).
    for (let i = 0; i < 13; i++) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${made.key}` } });
      expect(res.status).toBe(200);
    }
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US' });
    const page = await context.newPage();
    const cspViolations: string[] = [];
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    await page.goto(await portalLink(gamma.id as string));
    await page.getByRole('heading', { name: 'Usage now' }).waitFor();
    await page.getByRole('link', { name: 'Invoice' }).click();
    await page.getByRole('heading', { name: 'Invoice preview' }).waitFor();
    const rows = page.locator('#invoice-lines tr');
    await expect.poll(() => rows.count()).toBe(6);
    const cells = async () => Promise.all((await rows.all()).map((row) => row.locator('th, td').allTextContents()));
    expect(await cells()).toEqual([
      ['Line', 'Quantity', 'Amount'],
      ['Base fee for the billing period', '', '€49.00'],
      ['Units included (10)', '0 units', '€0.00'],
      ['Units beyond those included: €0.50 per 4 started', '0 units (billed as 0)', '€0.00'],
      ['Prepaid credits used (paid when bought)', '13 credits', '€0.00'],
      ['Total', '', '€49.00'],
    ]);
    expect(await page.locator('#invoice-period').textContent()).toMatch(/, so far: 13 units on your metered plan\.$/);
    // The CSV link: the admin API's file, from the portal, with the session cookie.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download these lines as CSV' }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(new RegExp(`^invoice-${gamma.id}-\\d{4}-\\d\\d-\\d\\d\\.csv$`));
    const csv = readFileSync((await download.path()) as string, 'utf8');
    expect(csv.split('\r\n').slice(1, -1)).toEqual([
      'base,Base fee for the billing period,1,,,,4900,EUR',
      'included,Units included (10),0,,,,0,EUR',
      'overage,"Units beyond those included, 50 per 4 started",0,0,50,4,0,EUR',
      'credits,Prepaid credits spent,13,,,,0,EUR',
      'total,Total,,,,,4900,EUR',
    ]);
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'invoice-1280', true);

    // The period before: nothing used, the base fee alone.
    // Both periods total the base fee alone (credits paid this one's units), so the wait is on
    // the period's line, which differs.
    await page.getByLabel('The one before').check();
    await expect.poll(() => page.locator('#invoice-period').textContent()).toMatch(/: 0 units on your metered plan\.$/);
    expect(await rows.last().locator('td').last().textContent()).toBe('€49.00');
    await page.getByLabel('This one, so far').check();
    await expect
      .poll(() => page.locator('#invoice-period').textContent())
      .toMatch(/: 13 units on your metered plan\.$/);
    expect(await rows.last().locator('td').last().textContent()).toBe('€49.00');

    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForLoadState('networkidle');
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'invoice-390', true);

    // Another customer, on a plan without a price: its page says so, and Gamma's id in its
    // requests, JSON or CSV, answers the 404 of an unknown customer and leaves an audit line.
    const delta = await adminPost('/admin/customers', { name: 'Delta Ducks', plan: 'free' });
    const other = await (await browser.newContext({ locale: 'en-US' })).newPage();
    await other.goto(await portalLink(delta.id as string));
    await other.getByRole('heading', { name: 'Usage now' }).waitFor();
    await other.getByRole('link', { name: 'Invoice' }).click();
    await other.getByText('Your plan (free) has no price: there is no invoice to preview').waitFor();
    expect(await other.locator('#invoice-lines').count()).toBe(0);
    expect(await axeViolations(other)).toEqual([]);
    const refusedBefore = logs.filter((l) => l.audit === 'portal.refused').length;
    for (const url of [
      `/portal/api/invoice-preview?customerId=${gamma.id}`,
      `/portal/api/invoice-preview?customerId=${gamma.id}&format=csv&period=previous`,
    ]) {
      expect(await fromPage(other, 'GET', url), url).toBe(404);
    }
    const refused = logs.filter((l) => l.audit === 'portal.refused').slice(refusedBefore);
    expect(refused).toEqual([
      expect.objectContaining({ actor: { customerId: delta.id }, otherCustomerId: gamma.id }),
      expect.objectContaining({ actor: { customerId: delta.id }, otherCustomerId: gamma.id }),
    ]);
    expect(cspViolations).toEqual([]);
    await other.context().close();
    await context.close();
  });
  it('shows a customer its times on its own clock, a banned key with why and what to do, and its empty balance with how to top up', {
    timeout: 120_000,
  }, async () => {
    // A customer whose clock is half an hour off UTC's hours, with 3 credits bought.
    const kappa = await adminPost('/admin/customers', {
      name: 'Kappa Kites',
      plan: 'pro',
      billing: { anchorDay: 1, timeZone: 'Asia/Kolkata' },
      credits: {},
    });
    // The zone as the gateway keeps it (Asia/Kolkata, or its older name Asia/Calcutta): the pages name that one.
    const zone = (kappa.billing as unknown as { timeZone: string }).timeZone;
    expect(['Asia/Kolkata', 'Asia/Calcutta']).toContain(zone);
    await adminPost(`/admin/customers/${kappa.id}/credits`, { amount: 3, reason: 'Order 9' });
    // One key with a minute of its own of 3, which spends the credits and is then banned; the other
    // finds its customer's windows open and no credit left.
    const app = await adminPost('/admin/keys', { customerId: kappa.id, name: 'kites app', limits: { perMinute: 3 } });
    const batch = await adminPost('/admin/keys', { customerId: kappa.id, name: 'kites batch' });
    const answers: string[] = [];
    while (answers.length < 60 && answers.at(-1) !== '429 api_key_banned') {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${app.key}` } });
      answers.push(res.status === 200 ? '200' : `${res.status} ${((await res.json()) as { code: string }).code}`);
    }
    expect(answers.slice(0, 3)).toEqual(['200', '200', '200']);
    expect(answers.at(-1), answers.join()).toBe('429 api_key_banned');
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${batch.key}` } });
      expect(res.status).toBe(402);
    }
    const { bannedUntil } = await adminGet<{ bannedUntil: string }>(`/admin/keys/${app.id}`);

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(await portalLink(kappa.id as string));
    await page.getByRole('heading', { name: 'Usage now' }).waitFor();
    // An instant as the pages write it, in the browser's own Intl: on the customer's clock, its zone named.
    const local = (iso: string, dateOnly = false) =>
      page.evaluate(
        ([at, z, day]) =>
          `${new Date(at as string).toLocaleString('en-GB', { timeZone: z as string, dateStyle: 'medium', ...(day ? {} : { timeStyle: 'short' }) })}${day ? '' : ` ${z}`}`,
        [iso, zone, dateOnly] as const,
      );
    const banEnd = await local(bannedUntil);
    expect(banEnd).toMatch(/\d\d:\d\d Asia\/(Kolkata|Calcutta)$/);

    // Usage now: out of credits, said with what to do; the banned key named, pointing to Keys.
    await expect
      .poll(() => page.locator('#out-of-credits').textContent())
      .toBe(
        'You are out of credits.' +
          'Every request with your keys is refused 402 Payment Required (credits_exhausted), and nothing refills the balance by itself.' +
          'Credits are topped up for you, not on this page: for a top-up, ask the team that runs this API, who sent you the link to this portal.',
      );
    expect(await page.locator('#usage-bans').textContent()).toBe(
      `Key “kites app” is banned until ${banEnd} for sending on after its 429s: Keys says why and what to do.`,
    );
    expect(await page.locator('#usage-period').textContent()).toContain(` ${zone} to `);
    const ledgerCells = page.locator('#credits tbody tr td:first-child');
    await expect.poll(() => ledgerCells.count()).toBeGreaterThan(0);
    const ledgerTimes = await ledgerCells.allTextContents();
    for (const text of ledgerTimes) expect(text.endsWith(` ${zone}`), text).toBe(true);
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'usage-out-of-credits-1280');

    // Keys, by the notice's link: the ban on the key's card, until when, why and what ends it; each
    // key's windows its customer's.
    await page.locator('#usage-bans').getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('heading', { name: 'Your keys' }).waitFor();
    const ban = page.locator(`[data-ban="${app.id}"]`);
    await expect
      .poll(() => ban.textContent())
      .toBe(
        `Banned until ${banEnd}.` +
          'Its clients kept sending requests after being answered 429 Too Many Requests, without waiting the Retry-After each answer gave, so every request with this key is refused 429 api_key_banned until then.' +
          'The ban ends by itself. Have your clients wait the Retry-After of each 429 so it does not happen again; to have it lifted sooner, ask the team that runs this API, who sent you the link to this portal.',
      );
    expect(await page.locator(`[data-ban="${batch.id}"]`).count()).toBe(0);
    for (const key of [app, batch]) {
      expect(await page.locator(`[data-key-windows="${key.id}"]`).textContent()).toBe(
        'Its rate limits are your account’s: every request with it counts toward the windows all your keys share, and toward its own if it has limits of its own (Usage now shows them).',
      );
    }
    expect(await page.locator(`[data-key="${app.id}"] p.muted`).first().textContent()).toContain(` ${zone}`);
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'keys-banned-1280');

    // Over time, by billing period: each period's first day in its calendar (its local midnight is
    // the day before in UTC), the 429s and the 402s apart.
    await page.getByRole('link', { name: 'Over time' }).click();
    await page.getByLabel('Step', { exact: true }).selectOption('period');
    await page.getByRole('button', { name: 'Show' }).click();
    const byPeriod = await adminGet<{ series: Array<{ start: string; units: number }> }>(
      `/admin/customers/${kappa.id}/usage/history?granularity=period`,
    );
    const rows = page.locator('#history-table tbody tr');
    await expect.poll(() => rows.count()).toBe(byPeriod.series.length);
    const refusals = answers.length - 3;
    await page.getByText(`3 units, ${refusals} refused (429), 4 out of credits (402), from `).waitFor();
    expect(await page.locator('#history-table th').allTextContents()).toEqual([
      `From (${zone})`,
      'Units',
      'Refused (429)',
      'Out of credits (402)',
      'Share',
    ]);
    const last = byPeriod.series.at(-1) as { start: string };
    const firstDay = await local(last.start, true);
    expect(firstDay).toMatch(/^1 /);
    expect((await rows.last().locator('td').allTextContents()).slice(0, 4)).toEqual([
      firstDay,
      '3',
      String(refusals),
      '4',
    ]);
    expect(await axeViolations(page)).toEqual([]);

    await page.setViewportSize({ width: 390, height: 844 });
    for (const name of ['usage', 'keys']) {
      await page.goto(`${portalOrigin}/portal#${name}`);
      await page.locator(`#${name}:not([hidden]) h1`).waitFor();
      await page.waitForLoadState('networkidle');
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await shoot(page, `${name}-banned-390`);
    }

    // A top-up by the operator ends the notice; the customer reads the new balance.
    await adminPost(`/admin/customers/${kappa.id}/credits`, { amount: 10, reason: 'Order 10' });
    await page.goto(`${portalOrigin}/portal#usage`);
    await page.getByText('10 credits left').waitFor();
    expect(await page.locator('#out-of-credits').count()).toBe(0);
    await context.close();
  });
  it('announces a rotation once the key list shows it, so an edit made after the announcement is saved as made', {
    timeout: 60_000,
  }, async () => {
    const delta = await adminPost('/admin/customers', { name: 'Delta Dogs', plan: 'pro' });
    const made = await adminPost('/admin/keys', { customerId: delta.id, name: 'delta app' });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(await portalLink(delta.id as string));
    await page.getByRole('heading', { name: 'Usage now' }).waitFor();
    await page.getByRole('link', { name: 'Keys' }).click();
    const card = page.locator(`[data-key="${made.id}"]`);
    await card.getByLabel('pets:write').waitFor();
    // The list's redraw after the rotation is held back until released: a slow network's answer.
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let listsAsked = 0;
    await page.route('**/portal/api/keys', async (route) => {
      listsAsked++;
      await held;
      await route.continue();
    });
    await card.getByRole('button', { name: 'Rotate' }).click();
    await expect.poll(() => listsAsked).toBe(1);
    // While the list is being redrawn nothing says the rotation is done.
    expect(await page.getByText('Key “delta app” rotated').count()).toBe(0);
    release();
    await page.getByText('Key “delta app” rotated').waitFor();
    const rotated = await page.getByLabel('The key').textContent();
    await card.getByLabel('pets:write').uncheck();
    await card.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Key “delta app” saved.').waitFor();
    const post = await fetch(`${gateway.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rotated}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Rex', categoryId: 1 }),
    });
    expect(post.status).toBe(403);
    await context.close();
  });
  it('shows a customer its leaked key, the successor and the time left, and hands the new secret over once', {
    timeout: 60_000,
  }, async () => {
    const echo = await adminPost('/admin/customers', { name: 'Echo Eels', plan: 'pro' });
    const made = await adminPost('/admin/keys', { customerId: echo.id, name: 'echo app' });
    // Found in a ticket and reported by hand: the default response rotates it, with an hour's grace.
    await adminPost('/admin/leaks', { key: made.key, source: 'a support ticket', url: 'https://support.example/t/1' });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(await portalLink(echo.id as string));
    await page.getByRole('heading', { name: 'Usage now' }).waitFor();
    await page.getByRole('link', { name: 'Keys' }).click();
    const notice = page.locator('[data-leak]');
    await notice.getByText(`Key “echo app” (${made.id}) was found leaked`).waitFor();
    const text = (await notice.textContent()) ?? '';
    expect(text).toContain('in a support ticket (https://support.example/t/1)');
    expect(text).toMatch(
      /It has a new secret \(it starts ask_[^…]+…\)\. The leaked secret keeps working for (59|60) min \d+ s more/,
    );
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'portal-leak-1280');
    await notice.getByRole('button', { name: 'Show the new secret (once)' }).click();
    await page.getByText('The new secret of key “echo app”').waitFor();
    const successor = (await page.getByLabel('The key').textContent()) ?? '';
    expect(successor).toMatch(/^ask_/);
    expect(successor).not.toBe(made.key);
    const pets = (key: string) => fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
    // The successor works; the leaked secret too, within its grace, saying so in its headers.
    expect((await pets(successor)).status).toBe(200);
    const leaked = await pets(made.key as string);
    expect(leaked.status).toBe(200);
    expect(leaked.headers.get('deprecation')).not.toBeNull();
    // Given once: a second ask is refused.
    const again = await fromPage(
      page,
      'POST',
      `${portalOrigin}/portal/api/leaks/${encodeURIComponent(
        (await adminGet<{ items: Array<{ id: string; keyId: string }> }>('/admin/leaks')).items.find(
          (l) => l.keyId === made.id,
        )?.id ?? '',
      )}/successor`,
    );
    expect(again).not.toBe(200);
    await context.close();
  });
});
