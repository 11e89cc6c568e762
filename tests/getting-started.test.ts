import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EnvReader } from '@animal-store/common/env.js';
import { createRegistry } from '@animal-store/common/metrics.js';
import { readOverloadConfig } from '@animal-store/common/overload.js';
import { ADMIN_TOKEN, startGateway, type TestGateway } from '@animal-store/gateway/test/support/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { afterAll, describe, expect, it } from 'vitest';
import { MissingPrerequisite, which } from './support/runtime.js';

/**
 * docs/getting-started.md, run as written: its sh blocks, in order, in one shell (as a reader's
 * terminal keeps CUSTOMER and KEY from step to step), against pets and a gateway started with the
 * plans file its first block writes, embedded as `npm start` runs it. Only what the page leaves to
 * the reader is filled in: the `export` lines holding `…` (the admin URL and token npm start
 * prints, OpenMeter's and Stripe's addresses and secrets) are given as the environment instead,
 * the gateway's port (8080, which another stack may hold) is this one's, and `npm run -s keys --`
 * is the built CLI. OpenMeter and Stripe are a local receiver that keeps what it is sent. Each
 * answer is checked against the block shown under it: JSON holds at least the fields shown (a
 * string ending in `…` starts with what is before it), text is the output as it is. The gateway's
 * clock is the test's: before the export is read it moves past the hour's close, and the closing
 * pass runs, as its timer would.
 */

const PAGE = 'docs/getting-started.md';
const TEXT = readFileSync(fileURLToPath(new URL(`../${PAGE}`, import.meta.url)), 'utf8');
const CLI = `"${process.execPath}" ${fileURLToPath(new URL('../services/gateway/dist/cli/main.js', import.meta.url))}`;
const HOUR = 3_600_000;

interface Step {
  code: string;
  /** The block shown under it, if any. */
  shown?: { lang: 'json' | 'text'; body: string };
}

/** The page's sh blocks, each with the json or text block that follows it before the next sh block. */
function steps(): Step[] {
  const blocks = [...TEXT.matchAll(/```(sh|json|text)\n([\s\S]*?)```/g)].map((m) => ({
    lang: m[1] as 'sh' | 'json' | 'text',
    body: m[2] as string,
  }));
  const out: Step[] = [];
  for (const block of blocks) {
    if (block.lang === 'sh') out.push({ code: block.body });
    else {
      const last = out.at(-1);
      if (!last || last.shown) throw new Error(`${PAGE}: a ${block.lang} block with no sh block before it`);
      last.shown = { lang: block.lang, body: block.body };
    }
  }
  return out;
}

/** What a shown JSON block promises: its fields, a string ending in `…` as a prefix. */
function promised(value: unknown): unknown {
  if (typeof value === 'string' && value.endsWith('…')) {
    return expect.stringMatching(new RegExp(`^${value.slice(0, -1).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
  }
  if (Array.isArray(value)) return value.map(promised);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, promised(v)]));
  }
  return value;
}

/** The last JSON answer in a step's output: curl ends none with a newline, so two answers share a line. */
function lastAnswer(out: string): unknown {
  for (let at = out.lastIndexOf('{'); at >= 0; at = out.lastIndexOf('{', at - 1)) {
    try {
      return JSON.parse(out.slice(at));
    } catch {
      // Not where the last answer starts: an object inside it, or text after it.
    }
  }
  throw new Error(`no JSON answer in: ${out}`);
}

/** A shell kept open across the steps, as the reader's terminal; each step's output and status. */
class Shell {
  private out = '';
  private err = '';
  private readonly sh: ChildProcessWithoutNullStreams;
  constructor(cwd: string, env: Record<string, string>) {
    this.sh = spawn('sh', [], { cwd, env });
    this.sh.stdout.on('data', (chunk: Buffer) => {
      this.out += chunk.toString();
    });
    this.sh.stderr.on('data', (chunk: Buffer) => {
      this.err += chunk.toString();
    });
  }

  async run(code: string): Promise<{ out: string; err: string; status: number }> {
    const marker = `@@done-${Math.random().toString(36).slice(2)}:`;
    this.out = '';
    this.err = '';
    this.sh.stdin.write(`${code}\necho "${marker}$?"\n`);
    await expect.poll(() => this.out.includes(marker), { timeout: 30_000, interval: 20 }).toBe(true);
    const at = this.out.indexOf(marker);
    return {
      out: this.out.slice(0, at),
      err: this.err,
      status: Number(this.out.slice(at + marker.length).split('\n')[0]),
    };
  }

  close(): void {
    this.sh.stdin.end();
    this.sh.kill();
  }
}

interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** OpenMeter and Stripe as far as the page's commands reach them: a receiver that keeps each request. */
async function receiver(): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body });
      res
        .writeHead(req.url?.startsWith('/v1/') ? 200 : 204, { 'content-type': 'application/json' })
        .end(req.url?.startsWith('/v1/') ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, server };
}

const open: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const close of open.reverse()) await close();
});

describe(`${PAGE}, as written`, () => {
  if (!which('curl')) throw new MissingPrerequisite('curl is not on PATH: apt-get install curl');

  it('takes a plan with a price to a customer, its key and credits, a portal link and its usage in OpenMeter and Stripe', {
    timeout: 120_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'getting-started-'));
    open.push(() => rmSync(dir, { recursive: true, force: true }));
    const all = steps();
    expect(all.length).toBeGreaterThanOrEqual(8);

    // Step 1 writes the plans file; its `npm start` line is the stack started below.
    const [first, ...rest] = all as [Step, ...Step[]];
    expect(first.code).toMatch(/^PLANS_FILE=plans\.json npm start$/m);
    const dummy = await receiver();
    open.push(() => new Promise((resolve) => dummy.server.close(resolve)));
    // A pending hour's minute, so the three requests fall in one hour whatever the time.
    let now = Math.floor(Date.now() / HOUR) * HOUR + 10 * 60_000;
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: dir,
      OPENMETER_URL: dummy.url,
      OPENMETER_TOKEN: 'om_test',
      STRIPE_API: dummy.url,
      STRIPE_SECRET_KEY: 'sk_test_123',
    };
    const shell = new Shell(dir, env);
    open.push(() => shell.close());
    const wrote = await shell.run(first.code.replace(/^PLANS_FILE=plans\.json npm start$/m, ''));
    expect(wrote.status, wrote.err).toBe(0);

    const pets = buildPets(
      { logLevel: 'silent', overload: readOverloadConfig(new EnvReader({ OVERLOAD_EVENT_LOOP_DELAY_MS: '0' })) },
      { store: new MemoryPetStore(), registry: createRegistry('pets', false) },
    );
    await pets.listen({ host: '127.0.0.1', port: 0 });
    open.push(() => pets.close());
    const gateway: TestGateway = await startGateway({
      redisUrl: null,
      upstream: `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`,
      now: () => now,
      env: { PLANS_FILE: join(dir, 'plans.json'), PORTAL_URL: 'http://127.0.0.1:8082' },
    });
    open.push(() => gateway.close());
    await gateway.listen();
    await gateway.admin.listen({ host: '127.0.0.1', port: 0 });
    const adminUrl = `http://127.0.0.1:${(gateway.admin.server.address() as AddressInfo).port}`;
    // What the reader pastes from npm start's banner.
    await shell.run(`export ADMIN_URL=${adminUrl} ADMIN_TOKEN=${ADMIN_TOKEN}`);

    let closed = false;
    for (const step of rest) {
      if (!closed && (step.code.includes('/admin/metering/events') || step.code.includes('keys -- metering'))) {
        // The hour of the requests has closed: its history written, the closing pass run.
        closed = true;
        now += HOUR + 6 * 60_000;
        await gateway.deps.history.flush();
        await gateway.deps.meteringCloser.closeDue();
      }
      const code = step.code
        .split('\n')
        .filter((line) => !/^export .*…/.test(line))
        .join('\n')
        .replaceAll('http://127.0.0.1:8080', gateway.url)
        .replaceAll('npm run -s keys --', CLI);
      const { out, err, status } = await shell.run(code);
      expect(status, `${step.code}\n${out}\n${err}`).toBe(0);
      if (!step.shown) continue;
      if (step.shown.lang === 'text') {
        expect(out.trim(), step.code).toBe(step.shown.body.trim());
      } else {
        expect(lastAnswer(out), step.code).toMatchObject(promised(JSON.parse(step.shown.body)) as object);
      }
    }

    // OpenMeter got the hour as a CloudEvent, Stripe as a form-encoded meter event of the customer.
    const customer = (await gateway.deps.customerStore.list({}, { limit: 10 })).items[0];
    expect(customer?.externalId).toBe('cus_NciAYcXfLnqBoz');
    const openmeter = dummy.received.filter((r) => r.path === '/api/v1/events');
    expect(openmeter).toHaveLength(1);
    expect(openmeter[0]?.headers['content-type']).toBe('application/cloudevents+json');
    expect(openmeter[0]?.headers.authorization).toBe('Bearer om_test');
    expect(JSON.parse(openmeter[0]?.body ?? '')).toMatchObject({
      specversion: '1.0',
      type: 'com.animalstore.usage.reported',
      subject: customer?.id,
      data: { units: 3, delta: 3 },
    });
    const stripe = dummy.received.filter((r) => r.path === '/v1/billing/meter_events');
    expect(stripe).toHaveLength(1);
    expect(stripe[0]?.headers.authorization).toBe(`Basic ${Buffer.from('sk_test_123:').toString('base64')}`);
    expect(stripe[0]?.headers['content-type']).toBe('application/x-www-form-urlencoded');
    const form = Object.fromEntries(new URLSearchParams(stripe[0]?.body.trim() ?? ''));
    expect(form).toEqual({
      event_name: 'api_units',
      identifier: expect.stringMatching(new RegExp(`^${customer?.id}/`)),
      timestamp: String((Math.floor(now / HOUR) - 1) * 3600),
      'payload[stripe_customer_id]': 'cus_NciAYcXfLnqBoz',
      'payload[value]': '3',
    });
  });
});
