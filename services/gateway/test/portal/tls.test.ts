import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MissingPrerequisite, which } from '@animal-store/tests/support/runtime.js';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestGateway, useGateways } from '../support/helpers.js';
import { adminPost, linkPath } from './support.js';

/*
 * The portal behind real TLS, as deployed: a TLS terminator (here node:https, with a certificate
 * made for the test) in front of the portal listener, passing X-Forwarded-Proto and
 * X-Forwarded-For, and TRUST_PROXY naming it (loopback). The browser's side is real https,
 * certificate checked: the session cookie is Secure and sign-in, reads and sign-out work.
 */

const gateways = useGateways();
let dir = '';
let tls: { key: Buffer; cert: Buffer };

beforeAll(async () => {
  if (!which('openssl')) throw new MissingPrerequisite('openssl is not on PATH: install it (apt-get install openssl)');
  dir = await mkdtemp(join(tmpdir(), 'portal-tls-'));
  const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
  // A self-signed certificate for localhost, made fresh: nothing secret is kept in the repository.
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  tls = { key: await readFile(key), cert: await readFile(cert) };
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Terminates TLS and forwards each request to `target` (http), saying it came over https and from whom. */
async function terminator(target: string): Promise<{ origin: string; server: Server }> {
  const upstream = new URL(target);
  const server = createServer(tls, (req, res) => {
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, 'x-forwarded-proto': 'https', 'x-forwarded-for': req.socket.remoteAddress },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.writeHead(502).end());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `https://localhost:${(server.address() as AddressInfo).port}`, server };
}

async function portalBehindTls(env: Record<string, string>) {
  const gw = await gateways.start({ env });
  const portal = await gw.portal.listen({ host: '127.0.0.1', port: 0 });
  const front = await terminator(portal);
  // The test's certificate is the only one trusted: the connection is checked, not waved through.
  const agent = new Agent({ connect: { ca: tls.cert } });
  const get = (path: string, headers: Record<string, string> = {}, method: 'GET' | 'POST' = 'GET') =>
    request(`${front.origin}${path}`, { method, headers, dispatcher: agent });
  const close = async () => {
    await agent.close();
    await new Promise((resolve) => front.server.close(resolve));
  };
  return { gw, get, close };
}

async function signInLink(gw: TestGateway): Promise<{ id: string; path: string }> {
  const { id } = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
  const { url } = await adminPost(gw, `/admin/customers/${id}/portal-sessions`);
  return { id: id as string, path: linkPath(url as string) };
}

describe('the portal behind a TLS terminator', () => {
  it('with TRUST_PROXY naming it: a Secure cookie, and sign-in, reads and sign-out over https', async () => {
    const { gw, get, close } = await portalBehindTls({ TRUST_PROXY: 'loopback' });
    try {
      const { id, path } = await signInLink(gw);
      const entered = await get(path);
      await entered.body.dump();
      expect(entered.statusCode).toBe(303);
      expect(entered.headers.location).toBe('/portal');
      const setCookie = String(entered.headers['set-cookie']);
      expect(setCookie).toMatch(
        /^portal_session=[\w-]{43}; Max-Age=3600; Path=\/portal; HttpOnly; Secure; SameSite=Strict$/,
      );
      const cookie = setCookie.split(';')[0] as string;

      const session = await get('/portal/api/session', { cookie });
      expect(session.statusCode).toBe(200);
      const body = (await session.body.json()) as { customer: { id: string }; csrfToken: string };
      expect(body.customer.id).toBe(id);
      const page = await get('/portal');
      expect(page.statusCode).toBe(200);
      expect(page.headers['strict-transport-security']).toBe('max-age=31536000');
      expect(await page.body.text()).toContain('<html');

      const out = await get('/portal/api/sign-out', { cookie, 'x-csrf-token': body.csrfToken }, 'POST');
      await out.body.dump();
      expect(out.statusCode).toBe(204);
      expect(String(out.headers['set-cookie'])).toMatch(/; Secure; SameSite=Strict$/);
      const after = await get('/portal/api/session', { cookie });
      await after.body.dump();
      expect(after.statusCode).toBe(401);
    } finally {
      await close();
    }
  });

  it('without TRUST_PROXY the forwarded protocol is not believed: the cookie is not Secure', async () => {
    const { gw, get, close } = await portalBehindTls({});
    try {
      const entered = await get((await signInLink(gw)).path);
      await entered.body.dump();
      expect(entered.statusCode).toBe(303);
      expect(String(entered.headers['set-cookie'])).not.toMatch(/Secure/);
      expect(entered.headers['strict-transport-security']).toBeUndefined();
    } finally {
      await close();
    }
  });
});
