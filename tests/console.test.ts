import { readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createRegistry } from '@animal-store/common/metrics.js';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '@animal-store/gateway/test/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from './support/redis.js';
import { which } from './support/runtime.js';

/**
 * The operators' console in a real headless Chromium (Debian's), against a gateway on a real
 * Redis in front of the pets service: sign in, create a key, traffic, the chart, rotate, revoke,
 * sign out; axe-core on every page; screenshots at 1280 and 390 px in reports/console/.
 */

const SHOTS = join(process.cwd(), 'reports', 'console');
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let redis: TestRedis;
let pets: ReturnType<typeof buildPets>;
let gateway: TestGateway;
let browser: Browser;
let consoleUrl: string;

beforeAll(async () => {
  const binary = which('chromium') ?? '/usr/bin/chromium';
  redis = await startRedis();
  pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: createRegistry('pets', false) });
  await pets.listen({ host: '127.0.0.1', port: 0 });
  gateway = await startGateway({
    redisUrl: redis.url,
    upstream: `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`,
    env: { BAN_THRESHOLD: '1000' },
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

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/** Pixels of the chart's canvas drawn in the admitted series' green and the refused series' red. */
async function barPixels(page: Page): Promise<{ green: number; red: number }> {
  // A string, evaluated in the page: this project's TypeScript has no DOM types.
  return page.evaluate(`(() => {
    const canvas = document.querySelector('.chart-canvas canvas');
    if (!canvas) return { green: 0, red: 0 };
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let green = 0;
    let red = 0;
    for (let i = 0; i < data.length; i += 4) {
      const r = data[i], g = data[i + 1], b = data[i + 2];
      if (g > 120 && r < 80 && b < 120) green++;
      if (r > 180 && g < 80 && b < 80) red++;
    }
    return { green, red };
  })()`);
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
    await expect.poll(() => lastRow.locator('td').allTextContents()).toEqual([expect.stringMatching(/h$/), '60', '10']);
    await shoot(page, 'key-1280');
    const pixels = await barPixels(page);
    expect(pixels.green).toBeGreaterThan(0);
    expect(pixels.red).toBeGreaterThan(0);
    expect(await axeViolations(page)).toEqual([]);

    // Rotate with the default grace: a new secret, and both work.
    await page.getByRole('button', { name: 'Rotate' }).click();
    // The dialog's own button: the page's Rotate button stays in the tree behind the modal.
    await page.getByRole('dialog').getByRole('button', { name: 'Rotate' }).click();
    const rotated = await page.getByTestId('secret').inputValue();
    expect(rotated).toMatch(/^ask_/);
    expect(rotated).not.toBe(secret);
    await page.getByRole('button', { name: 'Done' }).click();
    for (const key of [secret, rotated]) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(429);
    }

    // Revoke, after confirming: both secrets get 401.
    await page.getByRole('button', { name: 'Revoke' }).click();
    await shoot(page, 'revoke-confirm-1280');
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.getByTestId('key-status').textContent()).toBe('revoked');
    for (const key of [secret, rotated]) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(401);
    }

    // The overview and the keys table, wide and narrow.
    await page.getByRole('link', { name: 'Overview' }).click();
    await expect.poll(() => page.getByTestId('total-admitted').textContent()).toBe('60');
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
      // Nothing wider than the screen but the tables, which scroll in their own box.
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
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

  it('serves its files without the token and nothing else: the admin API still wants it', async () => {
    const base = consoleUrl.replace('/console', '');
    for (const path of ['/console', '/console/app.js', '/console/vendor/preact.js', '/console/vendor/uplot.css']) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
    expect((await fetch(`${base}/console/../admin/keys`)).status).toBe(401);
    expect((await fetch(`${base}/console/nothing.js`)).status).toBe(404);
    expect((await fetch(`${base}/admin/keys`)).status).toBe(401);
  });
});
