import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry } from '@animal-store/common/metrics.js';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '@animal-store/gateway/test/support/helpers.js';
import { startReceiver } from '@animal-store/gateway/test/support/webhook-receiver.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from './support/redis.js';
import { which } from './support/runtime.js';

/**
 * The operators' console in a real headless Chromium (Debian's), against a gateway on a real
 * Redis in front of the pets service: sign in, create a key, traffic, the chart, rotate, revoke,
 * change plan and limits, lift a ban, customers and their keys, webhooks and their deliveries,
 * sign out; axe-core on every page; screenshots at 1280 and 390 px in reports/console/.
 */

const SHOTS = join(process.cwd(), 'reports', 'console');
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let redis: TestRedis;
let pets: ReturnType<typeof buildPets>;
let gateway: TestGateway;
let browser: Browser;
let consoleUrl: string;

/**
 * The spec's four plans as they are built in, and one with a price for the invoice panel: a base
 * fee of 49.00 EUR for 10 units, then 0.50 EUR for every 4 units started beyond them.
 */
function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'console-plans-')), 'plans.json');
  const plans = {
    free: { windows: { minute: 60, day: 1000 } },
    pro: { windows: { minute: 300, day: 10000 } },
    business: { windows: { minute: 1000, day: 100000 } },
    enterprise: {},
    metered: {
      windows: { minute: 300, day: 10000 },
      price: { currency: 'EUR', base: 4900, includedUnits: 10, unitPrice: 50, per: 4 },
    },
    prepaid: { windows: { minute: 300, day: 10000 }, credits: { refill: { amount: 500, every: 'period' } } },
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
    env: {
      // More refusals than the first test makes (12), fewer than the ban test's.
      BAN_THRESHOLD: '15',
      // Each refusal counts toward a ban for the whole of its Retry-After.
      BAN_GRACE_MS: '0',
      // The webhook receiver is on loopback over http; retries in milliseconds.
      WEBHOOKS_ALLOW_INSECURE: 'true',
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WEBHOOKS_RETRY_BASE_MS: '20',
      WEBHOOKS_RETRY_MAX_DELAY_MS: '100',
      PLANS_FILE: plansFile(),
    },
  });
  await gateway.listen();
  await gateway.admin.listen({ host: '127.0.0.1', port: 0 });
  consoleUrl = `http://127.0.0.1:${(gateway.admin.server.address() as AddressInfo).port}/console`;
  await mkdir(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: binary, args: ['--no-sandbox', '--disable-gpu'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await pets?.close();
  await redis?.stop();
});

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

/** A page at 1280 px in a new browser context, signed in with the admin token, on the overview. */
async function signedIn(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await page.goto(consoleUrl);
  await page.getByLabel('Admin token (ADMIN_TOKEN)').fill(ADMIN_TOKEN);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  return { context, page };
}

const adminHeaders = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

async function adminCall(method: string, path: string, body?: unknown): Promise<Response> {
  const base = consoleUrl.replace('/console', '');
  return fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? { authorization: adminHeaders.authorization } : adminHeaders,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** One request through the gateway with `key`: its status and, for an error, its code. */
async function call(key: string): Promise<string> {
  const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.json()) as { code?: string };
  return res.status === 200 ? '200' : `${res.status} ${body.code}`;
}

/** The whole page; `fullPage` false: the screen as seen, as a modal dialog is (its backdrop covers only that). */
async function shoot(page: Page, name: string, fullPage = true): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage });
}

interface Bar {
  /** CSS pixels. */
  width: number;
  height: number;
}

/**
 * The bars of the chart's canvas, by colour: the admitted series' green and the refused series'
 * red, each as the box its pixels fill (one busy hour: one bar each), on the page's `chart`-th chart.
 */
async function bars(page: Page, chart = 0): Promise<{ green: Bar; red: Bar }> {
  // A string, evaluated in the page: this project's TypeScript has no DOM types.
  return page.evaluate(`(() => {
    const canvas = document.querySelectorAll('.chart-canvas canvas')[${chart}];
    const none = { width: 0, height: 0 };
    if (!canvas) return { green: none, red: none };
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    const box = () => ({ left: Infinity, right: -1, top: Infinity, bottom: -1 });
    const green = box();
    const red = box();
    for (let i = 0; i < data.length; i += 4) {
      const r = data[i], g = data[i + 1], b = data[i + 2];
      const hit = g > 120 && r < 80 && b < 120 ? green : r > 180 && g < 80 && b < 80 ? red : null;
      if (!hit) continue;
      const x = (i / 4) % canvas.width, y = Math.floor(i / 4 / canvas.width);
      hit.left = Math.min(hit.left, x); hit.right = Math.max(hit.right, x);
      hit.top = Math.min(hit.top, y); hit.bottom = Math.max(hit.bottom, y);
    }
    const css = (b) => b.right < 0 ? none : {
      width: (b.right - b.left + 1) / devicePixelRatio,
      height: (b.bottom - b.top + 1) / devicePixelRatio,
    };
    return { green: css(green), red: css(red) };
  })()`);
}

/** How far right any table cell reaches, in CSS pixels: at 390 px nothing may lie beyond the screen. */
async function widestCell(page: Page): Promise<number> {
  return page.evaluate(
    "Math.max(0, ...[...document.querySelectorAll('td, th')].filter((c) => c.getClientRects().length > 0 && getComputedStyle(c).position !== 'absolute' && !c.closest('thead')).map((c) => c.getBoundingClientRect().right))",
  );
}

describe('the console (/console on the admin listener)', () => {
  it('signs in, creates a key, charts its traffic, rotates, revokes and signs out, accessibly, at 1280 and 390 px', {
    timeout: 120_000,
  }, async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const cspViolations: string[] = [];
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    const requests: string[] = [];
    page.on('request', (request) => requests.push(request.url()));

    const first = await page.goto(consoleUrl);
    expect(first?.status()).toBe(200);
    expect(first?.headers()['content-security-policy']).toMatch(/^default-src 'none'; script-src 'self' 'sha256-/);

    // Sign in by keyboard alone: the token field has the focus, Enter submits.
    await page.getByLabel('Admin token (ADMIN_TOKEN)').waitFor();
    await shoot(page, 'signin-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.keyboard.type('not-the-token');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('alert').textContent()).toBe('That admin token is not valid.');
    await page.getByLabel('Admin token (ADMIN_TOKEN)').fill(ADMIN_TOKEN);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    expect(await page.evaluate("sessionStorage.getItem('animal-store-admin-token')")).toBe(ADMIN_TOKEN);
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(page.url()).not.toContain(ADMIN_TOKEN);

    // Create a key: the secret is shown once.
    await page.getByRole('link', { name: 'Keys', exact: true }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByLabel('Plan').first().selectOption('free');
    await page.getByLabel('Name').fill('browser-test');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    const secret = await page.getByTestId('secret').inputValue();
    expect(secret).toMatch(/^ask_/);
    await shoot(page, 'key-created-1280');
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByTestId('key-id').waitFor();
    const keyId = await page.getByTestId('key-id').textContent();
    expect(await page.getByTestId('key-status').textContent()).toBe('active');

    // Traffic through the gateway: free is 60 a minute, so 60 admitted and 10 refused.
    const statuses: number[] = [];
    for (let i = 0; i < 70; i++) {
      statuses.push((await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${secret}` } })).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(60);
    // The live windows refresh by themselves.
    await expect
      .poll(async () => page.getByTestId('windows').locator('tr', { hasText: 'minute' }).textContent(), {
        timeout: 10_000,
      })
      .toMatch(/^minute60600/);
    await page.reload();
    await page.getByText('The figures').click();
    const lastRow = page.getByTestId('chart-table').locator('tbody tr').last();
    await expect
      .poll(() => lastRow.locator('td').allTextContents())
      .toEqual([expect.stringMatching(/h$/), '60', '10', '0', '0']);
    await shoot(page, 'key-1280');
    // Bars stand on zero, so heights compare as counts do: 10 refused is a sixth of 60 admitted.
    // And one busy hour among the week's 168 is a bar, not a hairline.
    const chart = await bars(page);
    expect(chart.red.height / chart.green.height).toBeCloseTo(10 / 60, 1);
    expect(Math.min(chart.green.width, chart.red.width)).toBeGreaterThanOrEqual(5);
    expect(await axeViolations(page)).toEqual([]);

    // Rotate with the default grace, chosen in words: a new secret, and both work for a day.
    await page.getByRole('button', { name: 'Rotate' }).click();
    const dialog = page.getByRole('dialog');
    const grace = dialog.getByLabel('The old secret keeps working for');
    // Polled: the dialog opens on the click's next render, and allTextContents does not wait.
    await expect
      .poll(() => grace.locator('option').allTextContents())
      .toEqual(['Not at all: it stops now', '1 hour', '1 day', '3 days', '7 days']);
    expect(await grace.evaluate((select: { value: string }) => select.value)).toBe('86400');
    await shoot(page, 'rotate-1280');
    // The dialog's own button: the page's Rotate button stays in the tree behind the modal.
    await dialog.getByRole('button', { name: 'Rotate' }).click();
    const rotated = await page.getByTestId('secret').inputValue();
    expect(rotated).toMatch(/^ask_/);
    expect(rotated).not.toBe(secret);
    await page.getByRole('button', { name: 'Done' }).click();
    for (const key of [secret, rotated]) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(429);
    }
    await expect.poll(() => page.getByTestId('old-secret').count()).toBe(1);

    // Again, with no grace: the old secret stops at once, and the page no longer offers it as working.
    await page.getByRole('button', { name: 'Rotate' }).click();
    await grace.selectOption({ label: 'Not at all: it stops now' });
    await dialog.getByRole('button', { name: 'Rotate' }).click();
    const latest = await page.getByTestId('secret').inputValue();
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await call(rotated)).toBe('401 expired_api_key');
    await expect.poll(() => page.getByText('old secret until').count()).toBe(0);

    // Revoke, after confirming: every secret gets 401.
    await page.getByRole('button', { name: 'Revoke' }).click();
    await shoot(page, 'revoke-confirm-1280');
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.getByTestId('key-status').textContent()).toBe('revoked');
    for (const key of [secret, rotated, latest]) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(401);
    }

    // The overview and the keys table, wide and narrow. Every request of the day counts: 60
    // admitted, 10 refused by the minute and 2 after the first rotation.
    await page.getByRole('link', { name: 'Overview' }).click();
    await expect.poll(() => page.getByTestId('total-requests').textContent()).toBe('72');
    expect(await page.getByTestId('total-admitted').textContent()).toBe('60');
    expect(await page.getByTestId('total-refused').textContent()).toBe('12');
    await shoot(page, 'overview-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('link', { name: 'Keys', exact: true }).click();
    await page.getByLabel('Search').fill('browser-test');
    await expect.poll(() => page.getByTestId('keys-table').locator('tbody tr').count()).toBe(1);
    expect(await page.getByTestId('keys-table').locator('tbody tr').textContent()).toContain(keyId as string);
    await page.getByLabel('Status').selectOption('active');
    await expect.poll(() => page.getByTestId('keys-table').locator('tbody tr').count()).toBe(0);
    await page.getByLabel('Status').selectOption('');
    await shoot(page, 'keys-1280');
    expect(await axeViolations(page)).toEqual([]);

    await page.setViewportSize({ width: 390, height: 844 });
    for (const [hash, name] of [
      ['#/overview', 'overview-390'],
      ['#/keys', 'keys-390'],
      [`#/keys/${keyId}`, 'key-390'],
    ] as const) {
      await page.goto(`${consoleUrl}${hash}`);
      await page.getByRole('heading', { level: 1 }).first().waitFor();
      // Nothing wider than the screen, tables included: their rows reflow into lines.
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      expect(await widestCell(page)).toBeLessThanOrEqual(390);
      await shoot(page, name);
      expect(await axeViolations(page)).toEqual([]);
    }

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Admin token (ADMIN_TOKEN)').waitFor();
    expect(await page.evaluate("sessionStorage.getItem('animal-store-admin-token')")).toBeNull();

    expect(cspViolations).toEqual([]);
    // No request left this machine: every one went to the admin listener.
    expect(requests.filter((url) => !url.startsWith(consoleUrl.replace('/console', '/')))).toEqual([]);
    await context.close();
  });

  it('changes a key plan and own limits and lifts its ban, by keyboard, and the gateway applies each at once', {
    timeout: 120_000,
  }, async () => {
    const created = await adminCall('POST', '/admin/keys', { plan: 'free', name: 'ban-test' });
    expect(created.status).toBe(201);
    const { id, key } = (await created.json()) as { id: string; key: string };
    // free: 60 a minute; past that each request is refused, and the 16th refusal bans the key.
    const answers: string[] = [];
    while (answers.length < 100 && answers.at(-1) !== '429 api_key_banned') answers.push(await call(key));
    expect(
      answers.filter((a) => a === '200'),
      answers.join(),
    ).toHaveLength(60);
    expect(answers.at(-1), answers.slice(55).join()).toBe('429 api_key_banned');

    // The overview counts every ban in force, as the limiter's index holds them, and lists this one.
    const bans = (await (await adminCall('GET', '/admin/bans')).json()) as {
      count: number;
      items: Array<{ id: string }>;
    };
    expect(bans.items.map((b) => b.id)).toContain(id);
    const { context, page } = await signedIn();
    await expect.poll(() => page.getByTestId('banned-now').textContent()).toBe(String(bans.count));
    const bannedRow = page.getByTestId('banned-keys').locator('tr', { hasText: id });
    expect(await bannedRow.locator('td').allTextContents()).toEqual([
      id,
      expect.any(String),
      '—',
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/),
    ]);
    await shoot(page, 'overview-banned-1280');
    expect(await axeViolations(page)).toEqual([]);
    await bannedRow.getByRole('link', { name: id }).click();
    await expect.poll(() => page.getByTestId('key-status').textContent()).toBe('banned');

    // Lift ban by keyboard: Enter opens the dialog, Escape leaves it without lifting anything.
    // Focused and pressed as one step: a refresh of the key view between the two would drop the focus.
    await page.getByRole('button', { name: 'Lift ban' }).press('Enter');
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await shoot(page, 'lift-ban-confirm-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(await call(key)).toBe('429 api_key_banned');
    // Again, and confirm: the dialog opens on Cancel, Tab reaches its Lift ban, Enter sends it.
    // Focused and pressed as one step: a refresh of the key view between the two would drop the focus.
    await page.getByRole('button', { name: 'Lift ban' }).press('Enter');
    await dialog.waitFor();
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Cancel');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Lift ban');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('key-status').textContent()).toBe('active');
    const after = (await (await adminCall('GET', '/admin/bans')).json()) as {
      count: number;
      items: Array<{ id: string }>;
    };
    expect(after.count).toBe(bans.count - 1);
    expect(after.items.map((b) => b.id)).not.toContain(id);
    // Served again: the minute window is still spent, so the refusal is the limit's, not the ban's.
    expect(await call(key)).toBe('429 rate_limit_exceeded');

    // Another plan: pro allows 300 a minute, so the same minute's requests pass again.
    await page.getByRole('button', { name: 'Change plan or limits' }).click();
    await dialog.getByLabel('Plan', { exact: true }).selectOption('pro');
    await shoot(page, 'change-plan-1280');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('key-plan').textContent()).toBe('pro');
    expect(await call(key)).toBe('200');
    // The live windows follow within their 2 s refresh.
    await expect
      .poll(
        async () => page.getByTestId('windows').locator('tr', { hasText: 'minute' }).locator('td').nth(1).textContent(),
        { timeout: 10_000 },
      )
      .toBe('300');

    // Its own limit of 5 a minute over the plan's day, below what it used: refused at once; then the plan's again.
    await page.getByRole('button', { name: 'Change plan or limits' }).click();
    await dialog.getByLabel('Per minute').fill('5');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('key-limits').textContent()).toBe('5/min, 10000/day');
    expect(await call(key)).toBe('429 rate_limit_exceeded');
    await page.getByRole('button', { name: 'Change plan or limits' }).click();
    await dialog.getByLabel("Use the plan's limits").check();
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('key-limits').textContent()).toBe('300/min, 10000/day');
    expect(await call(key)).toBe('200');

    // A limit of 0 is stopped by the form itself; a key revoked meanwhile by another operator is
    // the admin API's refusal, shown in the dialog, which stays open.
    await page.getByRole('button', { name: 'Change plan or limits' }).click();
    await dialog.getByLabel('Per minute').fill('0');
    await dialog.getByRole('button', { name: 'Save' }).click();
    expect(
      await dialog
        .getByLabel('Per minute')
        .evaluate((input: { validity: { rangeUnderflow: boolean } }) => input.validity.rangeUnderflow),
    ).toBe(true);
    expect(((await (await adminCall('GET', `/admin/keys/${id}`)).json()) as { limits: object }).limits).toEqual({
      perMinute: 300,
      perDay: 10_000,
    });
    await dialog.getByLabel('Per minute').fill('10');
    expect((await adminCall('DELETE', `/admin/keys/${id}`)).status).toBe(204);
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect
      .poll(() => dialog.getByRole('alert').textContent())
      .toMatch(/^Key key_\S+ was revoked at \S+ \(conflict\)$/);
    await shoot(page, 'change-refused-1280');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await call(key)).toBe('401 invalid_api_key');
    await context.close();
  });

  it('creates a key with its own scopes, addresses, hour and month windows and an expiry in UTC, from a browser in New York', {
    timeout: 120_000,
  }, async () => {
    // The browser's own zone is not UTC: the expiry typed must still be taken as UTC, as labelled.
    const context = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      timezoneId: 'America/New_York',
    });
    const page = await context.newPage();
    await page.goto(consoleUrl);
    await page.getByLabel('Admin token (ADMIN_TOKEN)').fill(ADMIN_TOKEN);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('link', { name: 'Keys', exact: true }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Plan').selectOption('enterprise');
    await dialog.getByLabel('Name').fill('reader-from-loopback');
    await dialog.getByLabel('Scopes').selectOption({ label: 'pets:read only' });
    await dialog.getByLabel('Allowed addresses (optional)').fill('127.0.0.1\n::1');
    await dialog.getByLabel('Expires at, UTC (optional)').fill('2031-01-01T12:30');
    // Every window a plan may limit is offered.
    for (const window of ['second', 'minute', 'hour', 'day', 'month']) {
      expect(await dialog.getByLabel(`Per ${window}`).count(), window).toBe(1);
    }
    await dialog.getByLabel('Per hour').fill('5');
    await dialog.getByLabel('Per month').fill('100');
    await shoot(page, 'key-create-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    await shoot(page, 'key-create-390');
    await page.setViewportSize({ width: 1280, height: 900 });
    await dialog.getByRole('button', { name: 'Create', exact: true }).click();
    const key = await page.getByTestId('secret').inputValue();
    await page.getByRole('button', { name: 'Done' }).click();
    const id = (await page.getByTestId('key-id').textContent()) as string;

    const record = (await (await adminCall('GET', `/admin/keys/${id}`)).json()) as Record<string, unknown>;
    expect(record).toMatchObject({
      plan: 'enterprise',
      scopes: ['pets:read'],
      allowedCidrs: ['127.0.0.1/32', '::1/128'],
      limits: { perHour: 5, perMonth: 100 },
      expiresAt: '2031-01-01T12:30:00.000Z',
    });
    // The gateway applies them: reads pass (the hour binds), writes lack the scope.
    const read = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
    expect(read.status).toBe(200);
    expect(read.headers.get('x-ratelimit-limit')).toBe('5');
    const write = await fetch(`${gateway.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Rex', categoryId: 1 }),
    });
    expect(write.status).toBe(403);
    expect(((await write.json()) as { code: string }).code).toBe('insufficient_scope');
    expect(await page.getByText('2031-01-01 12:30:00 UTC').count()).toBe(1);
    await context.close();
  });

  it('adds a webhook endpoint, shows its signed deliveries and retries, edits, rotates and deletes it', {
    timeout: 120_000,
  }, async () => {
    // The receiver answers its first request with 503, every later one with 200.
    const hook = await startReceiver([503]);
    try {
      const { context, page } = await signedIn();
      await page.getByRole('link', { name: 'Webhooks' }).click();
      await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
      await page.getByRole('button', { name: 'Add webhook' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByLabel('Endpoint URL').fill(hook.url);
      await dialog.getByLabel('Description').fill('billing alerts');
      // No event ticked: said in the dialog, nothing added.
      await dialog.getByRole('button', { name: 'Add', exact: true }).click();
      await expect.poll(() => dialog.getByRole('alert').textContent()).toBe('Pick at least one event.');
      await dialog.getByLabel('key.created').check();
      await dialog.getByLabel('key.revoked').check();
      await shoot(page, 'webhook-add-1280');
      expect(await axeViolations(page)).toEqual([]);
      await dialog.getByRole('button', { name: 'Add', exact: true }).click();
      const secret = await page.getByTestId('secret').inputValue();
      expect(secret).toMatch(/^whsec_/);
      await page.getByRole('button', { name: 'Done' }).click();
      await page.getByTestId('webhook-id').waitFor();
      const hookId = await page.getByTestId('webhook-id').textContent();
      expect(await page.getByTestId('webhook-state').textContent()).toBe('delivering');

      // A test event: refused once by the receiver, delivered on the retry, both attempts listed.
      await page.getByRole('button', { name: 'Send test event' }).click();
      await expect.poll(() => page.getByTestId('test-sent').textContent()).toMatch(/^Test event \S+ queued\.$/);
      await hook.until(2);
      const rows = page.getByTestId('deliveries').locator('tbody tr');
      await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(2);
      const cells = async (i: number) => (await rows.nth(i).locator('td').allTextContents()).slice(1, 5);
      expect(await cells(0)).toEqual(['webhook.test', '2', 'delivered', '200']);
      expect(await cells(1)).toEqual(['webhook.test', '1', 'retrying', '503']);

      // A key created elsewhere reaches the endpoint, signed with the secret the console showed once.
      const created = await adminCall('POST', '/admin/keys', { plan: 'free', name: 'hooked' });
      const { id: keyId } = (await created.json()) as { id: string };
      await hook.until(3);
      const delivery = hook.received[2];
      const payload = new Webhook(secret).verify(
        delivery?.body as string,
        delivery?.headers as Record<string, string>,
      ) as { type: string; data: { keyId: string } };
      expect(payload).toMatchObject({ type: 'key.created', data: { keyId } });
      await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(3);
      expect(await cells(0)).toEqual(['key.created', '1', 'delivered', '200']);
      await shoot(page, 'webhook-1280');
      expect(await axeViolations(page)).toEqual([]);
      // The attempts' eight columns reflow on a phone.
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await widestCell(page)).toBeLessThanOrEqual(390);
      await shoot(page, 'webhook-390');
      expect(await axeViolations(page)).toEqual([]);
      await page.setViewportSize({ width: 1280, height: 900 });

      // Edit: events untick and tick as the endpoint now listens.
      await page.getByRole('button', { name: 'Edit' }).click();
      await dialog.getByLabel('key.created').uncheck();
      await dialog.getByLabel('key.banned').check();
      await dialog.getByRole('button', { name: 'Save' }).click();
      await expect.poll(() => page.getByText('key.banned, key.revoked').count()).toBe(1);
      expect(
        ((await (await adminCall('GET', `/admin/webhooks/${hookId}`)).json()) as { events: string[] }).events,
      ).toEqual(['key.banned', 'key.revoked']);

      // Rotate the secret: a new one, shown once; the next delivery verifies with it.
      await page.getByRole('button', { name: 'Rotate secret' }).click();
      await dialog.getByRole('button', { name: 'Rotate' }).click();
      const rotated = await page.getByTestId('secret').inputValue();
      expect(rotated).toMatch(/^whsec_/);
      expect(rotated).not.toBe(secret);
      await page.getByRole('button', { name: 'Done' }).click();
      await adminCall('DELETE', `/admin/keys/${keyId}`);
      await hook.until(4);
      const revoked = hook.received[3];
      expect(
        new Webhook(rotated).verify(revoked?.body as string, revoked?.headers as Record<string, string>),
      ).toMatchObject({ type: 'key.revoked', data: { keyId } });

      // The list, then delete after confirming: gone from the list and from the admin API.
      await page.getByRole('link', { name: '← All webhooks' }).click();
      await expect.poll(() => page.getByTestId('webhooks-table').locator('tbody tr').count()).toBe(1);
      expect(await page.getByTestId('webhooks-table').locator('tbody tr td').allTextContents()).toEqual([
        hook.url,
        'billing alerts',
        '2',
        'delivering',
        expect.stringMatching(/ UTC$/),
      ]);
      await shoot(page, 'webhooks-1280');
      expect(await axeViolations(page)).toEqual([]);
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await shoot(page, 'webhooks-390');
      await page.setViewportSize({ width: 1280, height: 900 });
      await page.getByRole('link', { name: hook.url }).click();
      await page.getByRole('button', { name: 'Delete' }).click();
      await dialog.getByRole('button', { name: 'Delete' }).click();
      await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
      await expect.poll(() => page.getByTestId('webhooks-table').locator('tbody tr').count()).toBe(0);
      expect((await adminCall('GET', `/admin/webhooks/${hookId}`)).status).toBe(404);
      await context.close();
    } finally {
      await hook.close();
    }
  });

  it('finds a customer by name, shows its settings, shared windows, keys and usage, and walks to a key and back', {
    timeout: 120_000,
  }, async () => {
    const made = await adminCall('POST', '/admin/customers', {
      name: 'Acme Corp',
      plan: 'pro',
      limits: { perMinute: 50 },
      billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
      externalId: 'cus_Stripe9',
    });
    expect(made.status).toBe(201);
    const customerId = ((await made.json()) as { id: string }).id;
    // Another customer, which the name search leaves out.
    expect((await adminCall('POST', '/admin/customers', { name: 'Zenith Ltd', plan: 'free' })).status).toBe(201);
    const keys: Array<{ id: string; key: string }> = [];
    for (const name of ['acme production', 'acme ci']) {
      const res = await adminCall('POST', '/admin/keys', { customerId, name });
      expect(res.status).toBe(201);
      keys.push((await res.json()) as { id: string; key: string });
    }
    // Both keys count on the customer's one minute window: 3 and 2 requests, 5 used of its 50.
    for (const [i, n] of [
      [0, 3],
      [1, 2],
    ] as const) {
      for (let j = 0; j < n; j++) expect(await call(keys[i]?.key as string)).toBe('200');
    }

    const { context, page } = await signedIn();
    await page.getByRole('link', { name: 'Customers' }).click();
    await page.getByRole('heading', { name: 'Customers' }).waitFor();
    const rows = page.getByTestId('customers-table').locator('tbody tr');
    await expect.poll(() => rows.count()).toBeGreaterThanOrEqual(2);
    // A name prefix, in any case, asked of the admin API.
    await page.getByLabel('Name starts with').fill('acme');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.locator('td').allTextContents()).toEqual([
      customerId,
      'Acme Corp',
      'pro',
      'cus_Stripe9',
      'day 15, Europe/Paris',
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d Europe\/Paris$/),
    ]);
    // Another plan leaves it out; its external id finds it alone.
    await page.getByLabel('Plan').selectOption('free');
    await expect.poll(() => rows.count()).toBe(0);
    await page.getByLabel('Plan').selectOption('');
    await page.getByLabel('Name starts with').fill('');
    await page.getByLabel('External id').fill('cus_Stripe9');
    await expect.poll(() => rows.count()).toBe(1);
    await shoot(page, 'customers-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await widestCell(page)).toBeLessThanOrEqual(390);
    await shoot(page, 'customers-390');
    await page.setViewportSize({ width: 1280, height: 900 });

    await page.getByRole('link', { name: customerId }).click();
    await page.getByRole('heading', { name: 'Acme Corp' }).waitFor();
    expect(await page.getByTestId('customer-plan').textContent()).toBe('pro');
    expect(await page.getByTestId('customer-limits').textContent()).toBe('50/min, 10000/day, shared by its keys');
    expect(await page.getByTestId('customer-billing').textContent()).toBe('from day 15, Europe/Paris');
    expect(await page.getByTestId('customer-external-id').textContent()).toBe('cus_Stripe9');
    // Its billing month in its own calendar: from a 15th to the 14th of the next month, in Paris.
    const period = (await page.getByTestId('customer-period').textContent()) as string;
    expect(period).toMatch(/^\d{4}-\d\d-15 to \d{4}-\d\d-14 \(Europe\/Paris\)$/);
    await expect
      .poll(async () =>
        page.getByTestId('customer-windows').locator('tr', { hasText: 'minute' }).locator('td').allTextContents(),
      )
      .toEqual(['minute', '50', '5', '45', expect.stringMatching(/ Europe\/Paris$/)]);
    const keyRows = page.getByTestId('customer-keys').locator('tbody tr');
    await expect.poll(() => keyRows.count()).toBe(2);
    // The billing period so far: 5 admitted, 5 units; by day, today in Paris is its one busy day.
    await expect
      .poll(async () =>
        (await page.getByTestId('customer-periods').locator('tbody tr').last().locator('td').allTextContents()).slice(
          1,
        ),
      )
      .toEqual(['5', '0', '0', '0', '0', '5']);
    // The newest row is this period (with USAGE_HISTORY_DAYS at 63 the one before is listed above it).
    expect(
      await page.getByTestId('customer-periods').locator('tbody tr').last().locator('td').first().textContent(),
    ).toBe(period.replace(' (Europe/Paris)', ''));
    // Two charts, by hour over 7 days and by day over the billing period, each with its figures.
    const charts = page.locator('figure.chart');
    await expect.poll(() => charts.count()).toBe(2);
    expect(await charts.nth(1).locator('figcaption').textContent()).toBe(
      `This billing period by day, ${period.replace(' (Europe/Paris)', '')} (Europe/Paris)`,
    );
    // Today's admitted bar on the day chart, and no refused one.
    await expect.poll(async () => (await bars(page, 1)).green.height).toBeGreaterThan(0);
    expect((await bars(page, 1)).red).toEqual({ width: 0, height: 0 });
    await charts.nth(0).getByText('The figures').click();
    await expect
      .poll(() => page.getByTestId('chart-table').locator('tbody tr').last().locator('td').allTextContents())
      .toEqual([expect.stringMatching(/h$/), '5', '0', '0', '0']);
    const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Paris' }).format(new Date());
    await charts.nth(1).getByText('The figures (1 day with requests)').click();
    expect(await page.getByTestId('customer-days').locator('th').allTextContents()).toEqual([
      'day (Europe/Paris)',
      'admitted',
      'refused (429)',
      'out of credits (402)',
      'failed upstream',
    ]);
    expect(await page.getByTestId('customer-days').locator('tbody tr td').allTextContents()).toEqual([
      today,
      '5',
      '0',
      '0',
      '0',
    ]);
    await shoot(page, 'customer-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    // Its two charts are drawn anew at the new width on the resize event.
    await expect.poll(() => page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await widestCell(page)).toBeLessThanOrEqual(390);
    await shoot(page, 'customer-390');
    expect(await axeViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 1280, height: 900 });

    // One of its keys, whose page names its customer; and back.
    await page.getByRole('link', { name: keys[1]?.id as string }).click();
    await page.getByTestId('key-id').waitFor();
    expect(await page.getByTestId('key-id').textContent()).toBe(keys[1]?.id);
    expect(await page.getByTestId('key-plan').textContent()).toBe('pro');
    await page.getByTestId('key-customer').click();
    await page.getByRole('heading', { name: 'Acme Corp' }).waitFor();
    expect(await page.getByTestId('customer-id').textContent()).toBe(customerId);
    await context.close();
  });

  it("changes a customer's plan and billing, and deletes it with its keys, after confirming", {
    timeout: 60_000,
  }, async () => {
    const made = await adminCall('POST', '/admin/customers', { name: 'Globex', plan: 'free' });
    const customerId = ((await made.json()) as { id: string }).id;
    const created = await adminCall('POST', '/admin/keys', { customerId, name: 'globex app' });
    const { id: keyId, key } = (await created.json()) as { id: string; key: string };
    const { context, page } = await signedIn();
    await page.goto(`${consoleUrl}#/customers/${customerId}`);
    await page.getByRole('heading', { name: 'Globex' }).waitFor();

    // A zone whose clocks change by half an hour is the admin API's refusal, shown in the dialog.
    await page.getByRole('button', { name: 'Change plan, limits or billing' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Plan (its keys follow)').selectOption('pro');
    await dialog.getByLabel('Billing month starts on day').fill('10');
    await dialog.getByLabel('Time zone (IANA)').fill('Australia/Lord_Howe');
    await dialog.getByLabel('External id (empty: none)').fill('crm-42');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => dialog.getByRole('alert').textContent()).toMatch(/Australia\/Lord_Howe/);
    await shoot(page, 'customer-change-1280');
    expect(await axeViolations(page)).toEqual([]);
    await dialog.getByLabel('Time zone (IANA)').fill('America/New_York');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('customer-plan').textContent()).toBe('pro');
    expect(await page.getByTestId('customer-billing').textContent()).toBe('from day 10, America/New_York');
    expect(await page.getByTestId('customer-external-id').textContent()).toBe('crm-42');
    // Its key followed it to pro.
    expect(((await (await adminCall('GET', `/admin/keys/${keyId}`)).json()) as { plan: string }).plan).toBe('pro');

    // Delete: refused while it has a live key, unless its keys go with it.
    await page.getByRole('button', { name: 'Delete' }).click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => dialog.getByRole('alert').textContent()).toMatch(/\(conflict\)$/);
    expect((await adminCall('GET', `/admin/customers/${customerId}`)).status).toBe(200);
    await dialog.getByLabel('Revoke its live keys with it').check();
    await shoot(page, 'customer-delete-1280');
    expect(await axeViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('heading', { name: 'Customers' }).waitFor();
    expect((await adminCall('GET', `/admin/customers/${customerId}`)).status).toBe(404);
    expect(await call(key)).toBe('401 invalid_api_key');
    await context.close();
  });

  it("sets a customer's own limits, shows the admin API's refusal as it words it, and goes back to the plan's", {
    timeout: 60_000,
  }, async () => {
    const made = await adminCall('POST', '/admin/customers', { name: 'Initech', plan: 'pro' });
    const customerId = ((await made.json()) as { id: string }).id;
    const { key } = (await (await adminCall('POST', '/admin/keys', { customerId, name: 'initech app' })).json()) as {
      key: string;
    };
    const { context, page } = await signedIn();
    await page.goto(`${consoleUrl}#/customers/${customerId}`);
    await page.getByRole('heading', { name: 'Initech' }).waitFor();
    expect(await page.getByTestId('customer-own-limits').textContent()).toBe('none: the plan’s');
    const minuteRow = page.getByTestId('customer-windows').locator('tr', { hasText: 'minute' }).locator('td');
    // The shared windows are read every 2 s.
    const live = { timeout: 10_000 };
    await expect.poll(async () => (await minuteRow.allTextContents()).slice(0, 2), live).toEqual(['minute', '300']);

    // A minute window wider than the day's: the admin API's own words, in the dialog, nothing saved.
    await page.getByRole('button', { name: 'Change plan, limits or billing' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.getByText('Its own now:').textContent()).toBe('Its own now: none, the plan’s.');
    await dialog.getByLabel('Per minute').fill('50');
    await dialog.getByLabel('Per day').fill('40');
    await dialog.getByRole('button', { name: 'Save' }).click();
    const refusal = await adminCall('PATCH', `/admin/customers/${customerId}`, {
      limits: { perMinute: 50, perDay: 40 },
    });
    expect(refusal.status).toBe(400);
    const said = (await refusal.json()) as { code: string; message: string };
    await expect.poll(() => dialog.getByRole('alert').textContent()).toBe(`${said.message} (${said.code})`);
    await shoot(page, 'customer-limits-1280', false);
    expect(await axeViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    // The charts behind the dialog are drawn anew at the new width on the resize event.
    await expect.poll(() => page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await shoot(page, 'customer-limits-390', false);
    await page.setViewportSize({ width: 1280, height: 900 });

    // A minute window of 2, shared: its keys get 2 requests a minute together, at once.
    await dialog.getByLabel('Per minute').fill('2');
    await dialog.getByLabel('Per day').fill('');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('customer-own-limits').textContent()).toBe("2/min over the plan's");
    expect(await page.getByTestId('customer-limits').textContent()).toBe('2/min, 10000/day, shared by its keys');
    expect(await call(key)).toBe('200');
    expect(await call(key)).toBe('200');
    expect(await call(key)).toBe('429 rate_limit_exceeded');
    await expect
      .poll(async () => (await minuteRow.allTextContents()).slice(0, 4), live)
      .toEqual(['minute', '2', '2', '0']);

    // Back to the plan's: the own limits go, and the plan's 300 a minute is in force again.
    await page.getByRole('button', { name: 'Change plan, limits or billing' }).click();
    expect(await dialog.getByText('Its own now:').textContent()).toBe('Its own now: 2/min.');
    await dialog.getByLabel("Use the plan's limits").check();
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('customer-own-limits').textContent()).toBe('none: the plan’s');
    expect(await page.getByTestId('customer-limits').textContent()).toBe('300/min, 10000/day, shared by its keys');
    const stored = (await (await adminCall('GET', `/admin/customers/${customerId}`)).json()) as { ownLimits?: unknown };
    expect(stored.ownLimits).toBeUndefined();
    expect(await call(key)).toBe('200');
    await context.close();
  });

  it('counts the active customers on the overview and lists the busiest, each linking to its page', {
    timeout: 60_000,
  }, async () => {
    const made = await adminCall('POST', '/admin/customers', { name: 'Umbrella', plan: 'business' });
    const customerId = ((await made.json()) as { id: string }).id;
    const { key } = (await (await adminCall('POST', '/admin/keys', { customerId, name: 'umbrella app' })).json()) as {
      key: string;
    };
    // More requests than any other customer of this file makes, so it heads the list.
    for (let i = 0; i < 40; i++) expect(await call(key)).toBe('200');
    const top = (await (await adminCall('GET', '/admin/usage?window=24h&limit=10')).json()) as {
      totals: { customers: number };
      customers: Array<{ id: string }>;
    };
    expect(top.customers[0]?.id).toBe(customerId);

    const { context, page } = await signedIn();
    await expect.poll(() => page.getByTestId('active-customers').textContent()).toBe(String(top.totals.customers));
    const rows = page.getByTestId('top-customers').locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(top.customers.length);
    expect(await rows.first().locator('td').allTextContents()).toEqual([
      customerId,
      'Umbrella',
      'business',
      '40',
      '0',
      '0',
    ]);
    await shoot(page, 'overview-customers-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    // The chart is drawn anew at the new width on the resize event.
    await expect.poll(() => page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await widestCell(page)).toBeLessThanOrEqual(390);
    await shoot(page, 'overview-customers-390');
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.getByTestId('top-customers').getByRole('link', { name: customerId }).click();
    await page.getByRole('heading', { name: 'Umbrella' }).waitFor();
    expect(await page.getByTestId('customer-id').textContent()).toBe(customerId);
    await context.close();
  });

  it('shows the keys a page at a time, and the next page with More', { timeout: 60_000 }, async () => {
    // More than one page (100) of keys, however many the other tests made.
    for (let i = 0; i < 101; i++)
      expect((await adminCall('POST', '/admin/keys', { plan: 'free', name: `pager ${i}` })).status).toBe(201);
    const { context, page } = await signedIn();
    await page.goto(`${consoleUrl}#/keys`);
    const rows = page.getByTestId('keys-table').locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(100);
    // Newest first, as the admin API orders them: keys made in the same millisecond tie, and the
    // API breaks the tie by id, so the head is asked of it rather than assumed to be the last.
    const head = (
      (await (await adminCall('GET', '/admin/keys?limit=1')).json()) as { items: Array<{ id: string; name: string }> }
    ).items[0];
    expect(head?.name).toMatch(/^pager (99|100)$/);
    expect(await rows.first().textContent()).toContain(head?.id ?? 'no key at the head');
    expect(await page.getByText(/^100 of 100 loaded keys$/).count()).toBe(1);
    await page.getByRole('button', { name: 'More' }).click();
    await expect.poll(() => rows.count()).toBeGreaterThan(100);
    expect(await page.getByText('pager 0', { exact: true }).count()).toBe(1);
    await context.close();
  });

  it('shows the customers a page at a time, and the next page with More', { timeout: 60_000 }, async () => {
    for (let i = 0; i < 101; i++)
      expect((await adminCall('POST', '/admin/customers', { name: `pager customer ${i}`, plan: 'free' })).status).toBe(
        201,
      );
    const { context, page } = await signedIn();
    await page.goto(`${consoleUrl}#/customers`);
    const rows = page.getByTestId('customers-table').locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(100);
    // Newest first, as the admin API orders them: customers made in the same millisecond tie, and
    // the API breaks the tie by id, so the head is asked of it rather than assumed to be the last.
    const head = (
      (await (await adminCall('GET', '/admin/customers?limit=1')).json()) as {
        items: Array<{ id: string; name: string }>;
      }
    ).items[0];
    expect(head?.name).toMatch(/^pager customer (99|100)$/);
    expect(await rows.first().textContent()).toContain(head?.id ?? 'no customer at the head');
    expect(await page.getByText(/^100 loaded customers$/).count()).toBe(1);
    await page.getByRole('button', { name: 'More' }).click();
    await expect.poll(() => rows.count()).toBeGreaterThan(100);
    expect(await page.getByText('pager customer 0', { exact: true }).count()).toBe(1);
    // A search starts from its own first page: one customer, no More.
    await page.getByLabel('Name starts with').fill('pager customer 0');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await page.getByRole('button', { name: 'More' }).count()).toBe(0);
    await context.close();
  });

  it("shows a customer's credits and invoice preview, records a retried top-up once, and says when a plan has no price", {
    timeout: 120_000,
  }, async () => {
    // Billed from today's date (at most the 28th) in UTC: the period before ended at most 3 days
    // ago and is at most 31 days long, so the 35 days of history kept hold it whole.
    const anchorDay = Math.min(new Date().getUTCDate(), 28);
    const made = await adminCall('POST', '/admin/customers', {
      name: 'Metered Mice',
      plan: 'metered',
      billing: { anchorDay, timeZone: 'UTC' },
      credits: { refill: { amount: 1000, every: 'period' } },
    });
    expect(made.status).toBe(201);
    const customerId = ((await made.json()) as { id: string }).id;
    const key = (await (await adminCall('POST', '/admin/keys', { customerId, name: 'mice' })).json()) as {
      key: string;
    };
    // 13 units, each paid by one of the 1000 credits refilled: none included nor overage (billing.md).
    for (let i = 0; i < 13; i++) expect(await call(key.key)).toBe('200');

    const { context, page } = await signedIn();
    await page.goto(`${consoleUrl}#/customers/${customerId}`);
    await page.getByRole('heading', { name: 'Metered Mice' }).waitFor();
    const credits = page.getByTestId('customer-credits');
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('987');
    expect(await page.getByTestId('credits-refill').textContent()).toBe('up to 1000 each billing period');
    expect(await page.getByTestId('credits-hour').textContent()).toBe('13 spent, in the ledger once the hour ends');
    const ledgerRows = page.getByTestId('credits-ledger').locator('tbody tr');
    await expect
      .poll(async () => (await ledgerRows.first().locator('td').allTextContents()).slice(1, 4))
      .toEqual(['refill', '+1000', 'for the billing period']);

    const invoice = page.getByTestId('customer-invoice');
    // The CSV link gives the admin API's file, amounts in minor units.
    await expectThirteenUnitsInvoice(page, invoice, new RegExp(`^invoice-${customerId}-\\d{4}-\\d\\d-\\d\\d\\.csv$`));
    await shoot(page, 'customer-billing-1280');
    await credits.screenshot({ path: join(SHOTS, 'customer-credits-1280.png') });
    await invoice.screenshot({ path: join(SHOTS, 'customer-invoice-1280.png') });
    expect(await axeViolations(page)).toEqual([]);

    // A top-up whose answer is lost on the way back: the admin API made it, the page saw a network
    // error. Sent again, it carries the same Idempotency-Key, and the balance grows once.
    const keysSent: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST' && request.url().endsWith('/credits'))
        keysSent.push(request.headers()['idempotency-key'] ?? 'none');
    });
    await page.route('**/credits', async (route) => {
      if (route.request().method() !== 'POST') return route.fallback();
      await route.fetch();
      return route.abort('failed');
    });
    await credits.getByLabel('Kind').selectOption('topup');
    await credits.getByLabel('Credits', { exact: true }).fill('500');
    await credits.getByLabel('Reason').fill('Order 77');
    await credits.getByRole('button', { name: 'Record' }).click();
    await expect.poll(() => credits.getByRole('alert').count()).toBe(1);
    await page.unroute('**/credits');
    await credits.getByRole('button', { name: 'Record' }).click();
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('1487');
    expect(await page.getByTestId('credit-made').textContent()).toMatch(/^topup of 500 recorded as crd_/);
    expect(keysSent).toHaveLength(2);
    expect(keysSent[1]).toBe(keysSent[0]);
    // A double click on a grant: one grant.
    await credits.getByLabel('Kind').selectOption('grant');
    await credits.getByLabel('Credits', { exact: true }).fill('5');
    await credits.getByLabel('Reason').fill('Goodwill');
    await credits.getByRole('button', { name: 'Record' }).dblclick();
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('1492');
    const ledger = (await (await adminCall('GET', `/admin/customers/${customerId}/credits/ledger`)).json()) as {
      items: Array<{ type: string; amount: number; reason?: string }>;
    };
    expect(ledger.items.map((e) => [e.type, e.amount])).toEqual([
      ['grant', 5],
      ['topup', 500],
      ['refill', 1000],
    ]);
    await expect.poll(async () => (await ledgerRows.allTextContents()).length).toBe(3);
    expect((await ledgerRows.nth(1).locator('td').allTextContents()).slice(1, 4)).toEqual([
      'topup',
      '+500',
      'Order 77',
    ]);
    // The admin API's refusal, as it words it: an adjustment below zero.
    await credits.getByLabel('Kind').selectOption('adjustment');
    await credits.getByLabel('Credits', { exact: true }).fill('-5000');
    await credits.getByLabel('Reason').fill('Too much');
    await credits.getByRole('button', { name: 'Record' }).click();
    await expect
      .poll(() => credits.getByRole('alert').textContent())
      .toBe('The balance is 1492: an adjustment of -5000 would take it below zero (conflict)');
    expect(await page.getByTestId('credits-balance').textContent()).toBe('1492');
    await credits.screenshot({ path: join(SHOTS, 'customer-credits-refused-1280.png') });

    // The period before: nothing used, the base fee alone.
    await invoice.getByLabel('the one before').check();
    await expect.poll(() => page.getByTestId('invoice-total').textContent()).toBe('€49.00');
    expect(await page.getByTestId('invoice-period').textContent()).toMatch(/: 0 units on plan metered$/);
    expect(
      await invoice.getByTestId('invoice-lines').locator('tbody tr').nth(2).locator('td').allTextContents(),
    ).toEqual(['overage units', 'beyond those included, €0.50 per 4 started', '0 (billed 0)', '€0.00']);
    await invoice.getByLabel('this one, so far').check();
    await expect.poll(() => page.getByTestId('invoice-period').textContent()).toMatch(/: 13 units on plan metered$/);
    expect(await page.getByTestId('invoice-total').textContent()).toBe('€49.00');

    // The ledger ten entries at a time: eight more grants make eleven, the refill on the second page.
    for (let i = 1; i <= 8; i++) {
      const res = await adminCall('POST', `/admin/customers/${customerId}/credits`, {
        amount: 1,
        reason: `Goodwill ${i}`,
        type: 'grant',
      });
      expect(res.status).toBe(201);
    }
    await page.reload();
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('1500');
    await expect.poll(() => ledgerRows.count()).toBe(10);
    expect((await ledgerRows.first().locator('td').allTextContents()).slice(1, 4)).toEqual([
      'grant',
      '+1',
      'Goodwill 8',
    ]);
    await credits.getByRole('button', { name: 'Older entries' }).click();
    await expect.poll(() => ledgerRows.count()).toBe(11);
    expect((await ledgerRows.last().locator('td').allTextContents()).slice(1, 3)).toEqual(['refill', '+1000']);
    expect(await credits.getByRole('button', { name: 'Older entries' }).count()).toBe(0);

    await page.setViewportSize({ width: 390, height: 844 });
    await expect.poll(() => page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await widestCell(page)).toBeLessThanOrEqual(390);
    expect(await axeViolations(page)).toEqual([]);
    await invoice.screenshot({ path: join(SHOTS, 'customer-invoice-390.png') });
    await credits.screenshot({ path: join(SHOTS, 'customer-credits-390.png') });
    await page.setViewportSize({ width: 1280, height: 900 });

    // A customer on a plan without a price, and without credit terms: each panel says so.
    const plain = (await (
      await adminCall('POST', '/admin/customers', { name: 'Plain Parrots', plan: 'pro' })
    ).json()) as {
      id: string;
    };
    await page.goto(`${consoleUrl}#/customers/${plain.id}`);
    await page.getByRole('heading', { name: 'Plain Parrots' }).waitFor();
    await expect
      .poll(() => page.getByTestId('invoice-unpriced').textContent())
      .toBe('Plan pro has no price, so there is no invoice to preview. Give it one in PLANS_FILE (plans.pro.price).');
    await expect
      .poll(() => page.getByTestId('credits-none').textContent())
      .toBe('No credit terms: its keys spend no credits.');
    expect(await credits.getByRole('button', { name: 'Record' }).count()).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    // Terms given here: a daily refill of 200, applied at the first read. The dialog opens on
    // what the customer stands on: no terms of its own, so its plan's (which has none).
    await credits.getByRole('button', { name: 'Give it credit terms' }).click();
    const dialog = page.getByRole('dialog', { name: 'Credit terms' });
    const ownChoice = dialog.getByLabel('terms of its own, below');
    const planChoice = dialog.getByLabel(/its plan's terms/);
    const noneChoice = dialog.getByLabel(/none: they stop/);
    const refillAmount = dialog.getByLabel('Refill up to (empty: no refill)');
    /** The radio the dialog opened on: one of the three is checked, the others not. */
    const chosen = async () => {
      const checked = await Promise.all([ownChoice, planChoice, noneChoice].map((radio) => radio.isChecked()));
      return ['own', 'plan', 'none'].filter((_, i) => checked[i]).join();
    };
    expect(await chosen()).toBe('plan');
    expect(await refillAmount.isDisabled()).toBe(true);
    await ownChoice.check();
    await refillAmount.fill('200');
    await dialog.getByLabel('Every').selectOption('day');
    expect(await axeViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('credits-refill').textContent()).toBe('up to 200 each day');
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('200');
    expect(
      ((await (await adminCall('GET', `/admin/customers/${plain.id}`)).json()) as { credits: unknown }).credits,
    ).toEqual({ refill: { amount: 200, every: 'day' } });
    expect(await credits.getByRole('button', { name: 'Record' }).count()).toBe(1);
    // Opened again: on its own terms, filled in.
    await credits.getByRole('button', { name: 'Change credit terms' }).click();
    expect(await chosen()).toBe('own');
    expect(await refillAmount.inputValue()).toBe('200');
    expect(await dialog.getByLabel('Every').inputValue()).toBe('day');
    // And taken away: spending stops, the balance and its ledger stay.
    await noneChoice.check();
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('credits-refill').textContent()).toBe('none: its keys spend no credits');
    expect(await page.getByTestId('credits-balance').textContent()).toBe('200');
    expect(await credits.getByRole('button', { name: 'Record' }).count()).toBe(0);
    // Opened again: on none (its null), not on terms of its own.
    await credits.getByRole('button', { name: 'Give it credit terms' }).click();
    expect(await chosen()).toBe('none');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });

    // Terms of its own dropped, its plan's followed again: the plan's refill, the balance kept.
    const prepaid = (await (
      await adminCall('POST', '/admin/customers', {
        name: 'Prepaid Pandas',
        plan: 'prepaid',
        credits: { refill: { amount: 50, every: 'day' } },
      })
    ).json()) as { id: string };
    await page.goto(`${consoleUrl}#/customers/${prepaid.id}`);
    await page.getByRole('heading', { name: 'Prepaid Pandas' }).waitFor();
    await expect.poll(() => page.getByTestId('credits-refill').textContent()).toBe('up to 50 each day');
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('50');
    await credits.getByRole('button', { name: 'Change credit terms' }).click();
    expect(await chosen()).toBe('own');
    expect(await refillAmount.inputValue()).toBe('50');
    await planChoice.check();
    // The refill fields are the record's own terms: nothing to say when its plan's are chosen.
    expect(await dialog.getByLabel('Refill up to (empty: no refill)').isDisabled()).toBe(true);
    expect(await dialog.getByLabel('Every').isDisabled()).toBe(true);
    expect(await axeViolations(page)).toEqual([]);
    await dialog.screenshot({ path: join(SHOTS, 'customer-credit-terms-1280.png') });
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('credits-refill').textContent()).toBe('up to 500 each billing period');
    // The plan's period began before today's refill: a refill is due only when a later period
    // starts, so a change of terms refills nothing and the balance stays at 50.
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('50');
    expect(
      ((await (await adminCall('GET', `/admin/customers/${prepaid.id}`)).json()) as { credits: unknown }).credits,
    ).toEqual({ refill: { amount: 500, every: 'period' } });
    // Opened again: on its plan's terms, the fields showing them as a start for its own.
    await credits.getByRole('button', { name: 'Change credit terms' }).click();
    expect(await chosen()).toBe('plan');
    expect(await refillAmount.isDisabled()).toBe(true);
    expect(await refillAmount.inputValue()).toBe('500');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await context.close();
  });

  it("shows a lone key's invoice preview for its UTC month on its page, and none on a customer's key's", {
    timeout: 60_000,
  }, async () => {
    const made = await adminCall('POST', '/admin/keys', { plan: 'metered', name: 'solo mice' });
    expect(made.status).toBe(201);
    const lone = (await made.json()) as { id: string; key: string };
    expect((await adminCall('PATCH', `/admin/keys/${lone.id}`, { credits: {} })).status).toBe(200);
    expect((await adminCall('POST', `/admin/keys/${lone.id}/credits`, { amount: 100, reason: 'o' })).status).toBe(201);
    // The customer panel's figures: 13 units, all paid by 13 credits.
    for (let i = 0; i < 13; i++) expect(await call(lone.key)).toBe('200');

    const { context, page } = await signedIn();
    await page.goto(`${consoleUrl}#/keys/${lone.id}`);
    await page.getByRole('heading', { name: 'solo mice' }).waitFor();
    const invoice = page.getByTestId('key-invoice');
    // Its period is the UTC month: the CSV is named for the key and the month's first day.
    await expectThirteenUnitsInvoice(page, invoice, new RegExp(`^invoice-${lone.id}-\\d{4}-\\d\\d-01\\.csv$`));
    expect(await axeViolations(page)).toEqual([]);
    await invoice.screenshot({ path: join(SHOTS, 'key-invoice-1280.png') });
    // The month before: the key did not exist, the base fee alone.
    await invoice.getByLabel('the one before').check();
    await expect.poll(() => invoice.getByTestId('invoice-total').textContent()).toBe('€49.00');
    expect(await invoice.getByTestId('invoice-period').textContent()).toMatch(/\(UTC\): 0 units on plan metered$/);

    // A key of a customer is billed as its customer: no panel on its page.
    const customer = (await (
      await adminCall('POST', '/admin/customers', { name: 'Billed Bats', plan: 'metered' })
    ).json()) as { id: string };
    const owned = (await (
      await adminCall('POST', '/admin/keys', { customerId: customer.id, name: 'bat key' })
    ).json()) as { id: string };
    await page.goto(`${consoleUrl}#/keys/${owned.id}`);
    await page.getByRole('heading', { name: 'bat key' }).waitFor();
    // The actions wait on the plans, as the panel does: once they show, the panel would have too.
    await page.getByRole('button', { name: 'Rotate' }).waitFor();
    expect(await page.getByTestId('key-customer').textContent()).toBe(customer.id);
    expect(await page.getByTestId('key-invoice').count()).toBe(0);
    await context.close();
  });

  it("shows a customer's key on its customer's clock, its windows its customer's, its ban and the empty balance with what to do", {
    timeout: 120_000,
  }, async () => {
    // A customer whose clock is half an hour off UTC's hours, spending credits it bought: 3.
    const made = await adminCall('POST', '/admin/customers', {
      name: 'Kolkata Koalas',
      plan: 'pro',
      billing: { anchorDay: 1, timeZone: 'Asia/Kolkata' },
      credits: {},
    });
    const created = (await made.json()) as { id: string; billing: { timeZone: string } };
    const customerId = created.id;
    // The zone as the gateway keeps it (Asia/Kolkata, or its older name Asia/Calcutta): the pages name that one.
    const zone = created.billing.timeZone;
    expect(['Asia/Kolkata', 'Asia/Calcutta']).toContain(zone);
    const zoned = (text: string) => new RegExp(`${text} ${zone.replace('/', '\\/')}$`);
    expect(
      (await adminCall('POST', `/admin/customers/${customerId}/credits`, { amount: 3, reason: 'order 7' })).status,
    ).toBe(201);
    // One key with a minute limit of its own of 3, the other with only its customer's windows.
    const keys: Array<{ id: string; key: string }> = [];
    for (const body of [{ name: 'koala app', limits: { perMinute: 3 } }, { name: 'koala batch' }]) {
      const res = await adminCall('POST', '/admin/keys', { customerId, ...body });
      keys.push((await res.json()) as { id: string; key: string });
    }
    const [app, batch] = keys as [{ id: string; key: string }, { id: string; key: string }];
    // The first spends the 3 credits, then its own window refuses it until it is banned.
    const answers: string[] = [];
    while (answers.length < 60 && answers.at(-1) !== '429 api_key_banned') answers.push(await call(app.key));
    expect(answers.slice(0, 3)).toEqual(['200', '200', '200']);
    expect(answers.at(-1), answers.join()).toBe('429 api_key_banned');
    // The second finds its customer's windows open and no credit left: 402, four times.
    for (let i = 0; i < 4; i++) expect(await call(batch.key)).toBe('402 credits_exhausted');
    // As the pages write an instant: Kolkata's wall clock, 5 h 30 ahead of UTC, to the second, its zone named.
    const kolkataOf = (iso: string) =>
      `${new Date(Date.parse(iso) + 5.5 * 3_600_000).toISOString().slice(0, 19).replace('T', ' ')} ${zone}`;
    // The ban's end as the key reads it (the key's page and the lists of keys) and as the limiter's
    // index of bans has it (the overview), which keeps it to the second.
    const { bannedUntil } = (await (await adminCall('GET', `/admin/keys/${app.id}`)).json()) as { bannedUntil: string };
    const kolkata = kolkataOf(bannedUntil);
    const banList = (await (await adminCall('GET', '/admin/bans?limit=100')).json()) as {
      items: Array<{ id: string; bannedUntil: string }>;
    };
    const listedEnd = banList.items.find((b) => b.id === app.id)?.bannedUntil as string;
    expect(Math.abs(Date.parse(listedEnd) - Date.parse(bannedUntil))).toBeLessThan(1_000);

    // The overview: the 402s counted apart from the 429s, and the ban's end on its customer's clock.
    const { context, page } = await signedIn();
    const totals = async () =>
      (
        (await (await adminCall('GET', '/admin/usage?window=24h&limit=10')).json()) as {
          totals: { admitted: number; refused: number; outOfCredits: number; forbidden: number };
        }
      ).totals;
    const now = await totals();
    expect(now.outOfCredits).toBeGreaterThanOrEqual(4);
    await expect.poll(() => page.getByTestId('out-of-credits-402').textContent()).toBe(String(now.outOfCredits));
    expect(await page.getByTestId('refused-429').textContent()).toBe(String(now.refused));
    expect(await page.getByTestId('total-out-of-credits').textContent()).toBe(String(now.outOfCredits));
    expect(await page.getByTestId('total-requests').textContent()).toBe(
      String(now.admitted + now.refused + now.outOfCredits + now.forbidden),
    );
    const bannedRow = page.getByTestId('banned-keys').locator('tr', { hasText: app.id });
    await expect
      .poll(() => bannedRow.locator('td').allTextContents())
      .toEqual([app.id, 'koala app', customerId, kolkataOf(listedEnd)]);
    await shoot(page, 'overview-402-1280');
    expect(await axeViolations(page)).toEqual([]);

    // The banned key's page: until when on its customer's clock, why, and what ends it.
    await bannedRow.getByRole('link', { name: app.id }).click();
    await expect.poll(() => page.getByTestId('key-status').textContent()).toBe('banned');
    expect(await page.getByTestId('key-zone').textContent()).toBe(`${zone}, its customer's billing zone`);
    expect(await page.getByTestId('key-banned-until').textContent()).toBe(kolkata);
    const ban = page.getByTestId('key-ban');
    expect(await ban.textContent()).toMatch(
      new RegExp(
        `^Banned until ${kolkata}\\. Its clients kept sending after their 429s without waiting\\s+the Retry-After each gave, so every request with it is refused\\s+429 api_key_banned on every replica until then\\.`,
      ),
    );
    expect(await ban.textContent()).toMatch(new RegExp(`Lift ban below\\s+\\(DELETE /admin/keys/${app.id}/ban\\)`));
    // Its windows: its customer's, shared with the other key, and its own minute on top.
    expect(await page.getByTestId('key-windows-owner').textContent()).toMatch(
      /^Its windows are its customer's: every key of\s+Kolkata Koalas counts toward them\s+\(300\/min, 10000\/day\)\. Its own limits below apply on top\.$/,
    );
    await expect
      .poll(() =>
        page.getByTestId('customer-windows').locator('tr', { hasText: 'minute' }).locator('td').allTextContents(),
      )
      .toEqual([
        'minute',
        '300',
        '3',
        '297',
        expect.stringMatching(zoned('^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d')),
      ]);
    expect(
      (await page.getByTestId('windows').locator('tr', { hasText: 'minute' }).locator('td').allTextContents()).slice(
        0,
        4,
      ),
    ).toEqual(['minute', '3', '3', '0']);
    // The customer it spends for is out of credits too: said here, with where to top it up.
    const out = page.getByTestId('out-of-credits');
    await expect
      .poll(() => out.textContent())
      .toMatch(
        /^Out of credits: its customer Kolkata Koalas has 0 left, so every request of its keys\s+is refused 402 credits_exhausted, and nothing refills it by itself\./,
      );
    expect(await out.textContent()).toContain(
      `Top up: its customer's page, Credits, Add or take credits, or POST /admin/customers/${customerId}/credits`,
    );
    await page.getByText('The figures').click();
    expect(await page.getByTestId('chart-table').locator('th').allTextContents()).toEqual([
      `hour (${zone})`,
      'admitted',
      'refused (429)',
      'out of credits (402)',
      'failed upstream',
    ]);
    expect(
      (await page.getByTestId('chart-table').locator('tbody tr').last().locator('td').first().textContent()) ?? '',
    ).toMatch(/^\d{4}-\d\d-\d\d \d\d:30$/);
    await shoot(page, 'key-banned-1280');
    expect(await axeViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    // Its chart is drawn anew at the new width on the resize event.
    await expect.poll(() => page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await widestCell(page)).toBeLessThanOrEqual(390);
    await shoot(page, 'key-banned-390');
    await page.setViewportSize({ width: 1280, height: 900 });

    // The other key: no ban, its customer's windows alone, its customer out of credits.
    await page.goto(`${consoleUrl}#/keys/${batch.id}`);
    await expect.poll(() => page.getByTestId('key-id').textContent()).toBe(batch.id);
    await expect
      .poll(() => page.getByTestId('key-windows-owner').textContent())
      .toMatch(/counts toward them\s+\(300\/min, 10000\/day\)\.$/);
    expect(await page.getByTestId('windows').count()).toBe(0);
    expect(await page.getByTestId('key-ban').count()).toBe(0);
    await expect.poll(() => page.getByTestId('out-of-credits').count()).toBe(1);
    // The keys list shows the ban's end on the customer's clock too.
    await page.getByRole('link', { name: 'Keys', exact: true }).click();
    await page.getByLabel('Search').fill('koala');
    const listed = page.getByTestId('keys-table').locator('tr', { hasText: app.id });
    await expect.poll(async () => (await listed.locator('td').allTextContents()).at(-1)).toBe(kolkata);

    // The customer's page: its keys' ban, its 402s apart from its 429s, its empty balance and the
    // form that tops it up; a top-up ends the notice.
    await page.goto(`${consoleUrl}#/customers/${customerId}`);
    await page.getByRole('heading', { name: 'Kolkata Koalas' }).waitFor();
    const keyRow = page.getByTestId('customer-keys').locator('tr', { hasText: app.id });
    await expect.poll(async () => (await keyRow.locator('td').allTextContents()).at(-1)).toBe(kolkata);
    const refusals = answers.length - 3;
    await expect
      .poll(async () =>
        (await page.getByTestId('customer-periods').locator('tbody tr').last().locator('td').allTextContents()).slice(
          1,
        ),
      )
      .toEqual(['3', String(refusals), '4', '0', '0', '3']);
    const panelOut = page.getByTestId('customer-credits').getByTestId('out-of-credits');
    await expect
      .poll(() => panelOut.textContent())
      .toBe(
        'Out of credits: every request of its keys is refused 402 credits_exhausted, and nothing refills the balance by itself.' +
          `Top up: record a top-up in Add or take credits below, or POST /admin/customers/${customerId}/credits.`,
      );
    const ledgerTimes = await page.getByTestId('credits-ledger').locator('tbody tr td:first-child').allTextContents();
    expect(ledgerTimes.length).toBeGreaterThan(0);
    for (const text of ledgerTimes) expect(text).toMatch(zoned(''));
    await shoot(page, 'customer-out-of-credits-1280');
    expect(await axeViolations(page)).toEqual([]);
    expect(
      (await adminCall('POST', `/admin/customers/${customerId}/credits`, { amount: 10, reason: 'order 8' })).status,
    ).toBe(201);
    await page.reload();
    await page.getByTestId('credits-balance').waitFor();
    await expect.poll(() => page.getByTestId('credits-balance').textContent()).toBe('10');
    expect(await page.getByTestId('out-of-credits').count()).toBe(0);
    expect(await call(batch.key)).toBe('200');
    await context.close();
  });

  it('shows a lone key in UTC, saying so, and its own empty balance with how to top it up', {
    timeout: 60_000,
  }, async () => {
    const made = await adminCall('POST', '/admin/keys', { plan: 'pro', name: 'solo owls' });
    const lone = (await made.json()) as { id: string; key: string };
    expect((await adminCall('PATCH', `/admin/keys/${lone.id}`, { credits: {} })).status).toBe(200);
    expect(await call(lone.key)).toBe('402 credits_exhausted');

    const { context, page } = await signedIn();
    await page.goto(`${consoleUrl}#/keys/${lone.id}`);
    await page.getByRole('heading', { name: 'solo owls' }).waitFor();
    expect(await page.getByTestId('key-zone').textContent()).toBe('UTC: a key of no customer');
    expect(await page.locator('dt:has-text("created") + dd').textContent()).toMatch(
      /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/,
    );
    // Its windows are its own: no sentence about a customer's.
    expect(await page.getByTestId('key-windows-owner').count()).toBe(0);
    await expect
      .poll(() => page.getByTestId('out-of-credits').textContent())
      .toBe(
        'Out of credits: this key has 0 left, so every request of it is refused 402 credits_exhausted, and nothing refills it by itself.' +
          `Top up: npm run keys -- credits ${lone.id} --add N --reason …, or POST /admin/keys/${lone.id}/credits with an amount and a reason.`,
      );
    expect(await axeViolations(page)).toEqual([]);
    await shoot(page, 'key-lone-out-of-credits-1280');
    expect((await adminCall('POST', `/admin/keys/${lone.id}/credits`, { amount: 5, reason: 'o' })).status).toBe(201);
    await page.reload();
    await page.getByTestId('key-zone').waitFor();
    expect(await call(lone.key)).toBe('200');
    await expect.poll(() => page.getByTestId('out-of-credits').count()).toBe(0);
    await context.close();
  });

  it('serves its files without the token and nothing else: the admin API still wants it', async () => {
    const base = consoleUrl.replace('/console', '');
    for (const path of [
      '/console',
      '/console/app.js',
      '/console/customers.js',
      '/console/billing.js',
      '/console/webhooks.js',
      '/console/vendor/preact.js',
      '/console/vendor/uplot.css',
    ]) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
    expect((await fetch(`${base}/console/../admin/keys`)).status).toBe(401);
    expect((await fetch(`${base}/console/nothing.js`)).status).toBe(404);
    // The icon a browser asks every origin for, and the one the page names.
    for (const path of ['/favicon.ico', '/console/favicon.svg']) {
      const icon = await fetch(`${base}${path}`);
      expect(icon.status, path).toBe(200);
      expect(icon.headers.get('content-type'), path).toBe('image/svg+xml');
      expect(await icon.text()).toMatch(/^<svg /);
    }
    expect((await fetch(`${base}/admin/keys`)).status).toBe(401);
  });
});

/**
 * An invoice panel (the customer's or a lone key's) for 13 units on plan metered, all paid by
 * credits (so neither included nor overage: the base fee alone): its lines, total and period, and
 * its CSV download, named as `csvName` says.
 */
async function expectThirteenUnitsInvoice(page: Page, invoice: Locator, csvName: RegExp): Promise<void> {
  const lines = invoice.getByTestId('invoice-lines').locator('tbody tr');
  await expect.poll(() => lines.count()).toBe(4);
  expect(await Promise.all((await lines.all()).map((row) => row.locator('td').allTextContents()))).toEqual([
    ['base', 'Base fee for the billing period', '1', '€49.00'],
    ['included', 'Units included (10)', '0', '€0.00'],
    ['overage units', 'beyond those included, €0.50 per 4 started', '0 (billed 0)', '€0.00'],
    ['credits used', 'prepaid credits spent (billed when bought)', '13', '€0.00'],
  ]);
  expect(await invoice.getByTestId('invoice-total').textContent()).toBe('€49.00');
  expect(await invoice.getByTestId('invoice-period').textContent()).toMatch(/\(UTC\): 13 units on plan metered$/);
  const [download] = await Promise.all([page.waitForEvent('download'), invoice.getByTestId('invoice-csv').click()]);
  expect(download.suggestedFilename()).toMatch(csvName);
  const csv = readFileSync((await download.path()) as string, 'utf8');
  expect(csv.split('\r\n').at(-2)).toBe('total,Total,,,,,4900,EUR');
}
