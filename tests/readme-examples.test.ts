import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { EnvReader } from '@animal-store/common/env.js';
import { createRegistry } from '@animal-store/common/metrics.js';
import { readOverloadConfig } from '@animal-store/common/overload.js';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '@animal-store/gateway/test/support/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { afterEach, describe, expect, it } from 'vitest';
import { MissingPrerequisite, which } from './support/runtime.js';

/**
 * The documented examples, run as written with curl (and the built keys CLI) against a started
 * gateway, so a reader who pastes them gets what the page says: the README's quick start, and the
 * admin API examples and keys file commands of docs/keys-and-plans.md. Only what the pages leave to
 * the reader is filled in: the ids and keys (`ID`, `ask_…`), the ports (the README's are the
 * defaults, which another stack may hold) and ADMIN_URL/ADMIN_TOKEN, which npm start prints. The
 * admin API examples run on the first, a middle and the last day of this month, on the gateway's
 * clock: none may depend on the date.
 */

const run = promisify(execFile);
const README = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
const KEYS_PAGE = 'docs/keys-and-plans.md';
const KEYS = readFileSync(fileURLToPath(new URL(`../${KEYS_PAGE}`, import.meta.url)), 'utf8');
/** The keys page's section that holds the admin API examples and the line to paste before them. */
const KEYS_SECTION = '## The admin API and the CLI';
const DAY = 86_400_000;

/** The body of the keys page's section headed `heading`, up to the next heading of that level or higher. */
function section(heading: string): string {
  const start = KEYS.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${KEYS_PAGE} has no "${heading}"`);
  const level = heading.split(' ')[0] as string;
  const rest = KEYS.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`^#{1,${level.length}} `, 'm'));
  return end < 0 ? rest : rest.slice(0, end);
}

/** A fenced sh block's commands, continuation lines joined, comments and blank lines dropped. */
function commands(block: string): Array<{ command: string; comment: string }> {
  return block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .map((line) => /^(.*?)\s*(?:#\s*(.*))?$/.exec(line.trim()) as RegExpExecArray)
    .filter((m) => m[1] !== '')
    .map((m) => ({ command: m[1] as string, comment: m[2] ?? '' }));
}

interface TableExample {
  what: string;
  command: string;
  status: number;
}

/** The keys section's admin API examples: each `- **what**: \`curl …\`` item's curl and the status it gives (→ 201), else 200. */
function keysTableExamples(): TableExample[] {
  return section(KEYS_SECTION)
    .split('\n')
    .flatMap((line) => {
      const m = /^- \*\*([^*]+)\*\*: `(curl [^`]+)`(.*)$/.exec(line);
      if (!m) return [];
      const [, what, command, rest] = m as unknown as [string, string, string, string];
      return [{ what, command, status: Number(/→ (\d{3})/.exec(rest)?.[1] ?? 200) }];
    });
}

/** The line the keys section has the reader paste before its examples: `A=…; J=…`. */
function keysPreamble(): string {
  const line = section(KEYS_SECTION)
    .split('\n')
    .find((l) => l.startsWith('A="Authorization'));
  if (!line) throw new Error(`${KEYS_PAGE}, ${KEYS_SECTION}: no A=… J=… line`);
  return line;
}

/** Runs a README command in sh with curl's status appended: the answer's text and its status. */
async function curl(command: string, env: Record<string, string>): Promise<{ out: string; status: number }> {
  const { stdout } = await run('sh', ['-c', `${command} -w '\\n%{http_code}'`], {
    env: { PATH: process.env.PATH ?? '', ...env },
    timeout: 15_000,
  });
  const cut = stdout.lastIndexOf('\n');
  return { out: stdout.slice(0, cut), status: Number(stdout.slice(cut + 1)) };
}

const stack: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  for (const s of stack.splice(0).reverse()) await s.close();
});

/** Pets and a gateway on loopback, embedded (its limiter and history keep to `now`), with its admin listener. */
async function started(now?: () => number): Promise<{ gateway: TestGateway; adminUrl: string }> {
  // This machine's load is not the services': no shedding by event-loop delay (as in the other suites).
  const pets = buildPets(
    { logLevel: 'silent', overload: readOverloadConfig(new EnvReader({ OVERLOAD_EVENT_LOOP_DELAY_MS: '0' })) },
    { store: new MemoryPetStore(), registry: createRegistry('pets', false) },
  );
  await pets.listen({ host: '127.0.0.1', port: 0 });
  stack.push(pets);
  const gateway = await startGateway({
    redisUrl: null,
    upstream: `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`,
    ...(now ? { now } : {}),
  });
  stack.push(gateway);
  await gateway.listen();
  await gateway.admin.listen({ host: '127.0.0.1', port: 0 });
  return { gateway, adminUrl: `http://127.0.0.1:${(gateway.admin.server.address() as AddressInfo).port}` };
}

async function newKey(adminUrl: string, plan: string): Promise<{ id: string; key: string }> {
  const res = await fetch(`${adminUrl}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ plan, name: 'readme' }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; key: string };
}

describe("the README's and the keys page's examples, as written", () => {
  if (!which('curl')) throw new MissingPrerequisite('curl is not on PATH: apt-get install curl');

  it('quick start: the index, a pet added (201, Location), listed, read by the id the POST gave, by status', async () => {
    const { gateway, adminUrl } = await started();
    const { key } = await newKey(adminUrl, 'free');
    const block = /## Quick start[\s\S]*?```sh\n(curl[\s\S]*?)```/.exec(README)?.[1];
    expect(block, 'README.md, Quick start: the curl block').toBeDefined();
    const examples = commands(block as string);
    expect(examples.length).toBeGreaterThanOrEqual(5);
    for (const { command, comment } of examples) {
      const written = command.replaceAll('http://127.0.0.1:8080', gateway.url).replaceAll('ask_…', key);
      const { out, status } = await curl(written, {});
      expect(status, `${command}\n${out}`).toBe(comment.startsWith('201') ? 201 : 200);
      // What the comment promises of the answer: its Location.
      const location = /Location: (\S+)/.exec(comment)?.[1];
      if (location) expect(out).toMatch(new RegExp(`^location: ${location.replace(/[?.]/g, '\\$&')}\\r?$`, 'im'));
    }
  });

  const today = new Date();
  const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
  const monthEnd = Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + 1, 1);
  it.each([
    ['the first', monthStart + 10 * 60_000],
    ['the 15th', monthStart + 14 * DAY + 12 * 3_600_000],
    ['the last', monthEnd - 10 * 60_000],
  ])('keys page: every admin API example answers as the page says, on %s day of this month', async (_day, at) => {
    const { gateway, adminUrl } = await started(() => at);
    const env = { ADMIN_URL: adminUrl, ADMIN_TOKEN };
    const examples = keysTableExamples();
    expect(examples.map((e) => e.what)).toEqual(expect.arrayContaining(['create', 'usage history', 'revoke']));
    for (const { what, command, status } of examples) {
      // Each example on a key of its own with a request behind it, so none depends on another.
      const { id, key } = await newKey(adminUrl, 'free');
      expect((await fetch(`${gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
      const answer = await curl(`${keysPreamble()}\n${command.replace(/\bID\b/g, id)}`, env);
      expect(answer.status, `${what} on ${new Date(at).toISOString()}: ${command}\n${answer.out}`).toBe(status);
      if (what === 'usage history') {
        // This month so far: from the 1st through the day the gateway's clock is on.
        expect(JSON.parse(answer.out)).toMatchObject({
          from: new Date(monthStart).toISOString(),
          to: new Date((Math.floor(at / DAY) + 1) * DAY).toISOString(),
          totals: { admitted: 1 },
        });
      }
    }
  });

  it('the keys file examples (--file): create, update and rotate as the keys page writes them', async () => {
    const block = /The CLI edits such a file[\s\S]*?```sh\n([\s\S]*?)```/.exec(KEYS)?.[1];
    expect(block, `${KEYS_PAGE}, keys in a file: the sh block`).toBeDefined();
    // `npm run -s keys --` is the built CLI (what `npm test` builds), run by this Node.
    const cli = `"${process.execPath}" ${fileURLToPath(new URL('../services/gateway/dist/cli/main.js', import.meta.url))}`;
    const dir = mkdtempSync(join(tmpdir(), 'readme-keys-file-'));
    stack.push({ close: async () => rmSync(dir, { recursive: true, force: true }) });
    let id = '';
    const ran: string[] = [];
    for (const { command } of commands(block as string)) {
      expect(command).toMatch(/^npm run -s keys -- /);
      const written = command.replace(/^npm run -s keys -- /, `${cli} `).replace(/\bID\b/, id);
      const { stdout } = await run('sh', ['-c', written], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '' },
        timeout: 15_000,
      });
      if (command.includes(' create ')) id = (JSON.parse(stdout) as { id: string }).id;
      ran.push(command.split(' ')[5] as string);
    }
    expect(ran).toEqual(['create', 'update', 'rotate']);
    expect(JSON.parse(readFileSync(join(dir, 'keys.json'), 'utf8'))).toEqual([
      expect.objectContaining({ id, plan: 'business', previous: expect.any(Object) }),
    ]);
  });
});
