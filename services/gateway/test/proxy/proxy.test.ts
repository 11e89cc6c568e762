import { createHash } from 'node:crypto';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUFFERED_BODY_BYTES } from '../../src/proxy/forward-handler.js';
import { addKey, bearer, type TestGateway, useGateways } from '../support/helpers.js';

/**
 * What the proxy does with bodies and headers on the way through: answers small enough to send
 * in one write and answers that stream, repeated fields, HEAD, hop-by-hop names a client lists in
 * Connection, and an upstream that breaks off mid-body.
 */

const gateways = useGateways();

const SMALL = JSON.stringify({ items: [{ id: 1, name: 'Rex' }] });
/** Several times the buffered size, so it streams, in chunks of uneven size. */
const LARGE = Buffer.alloc(BUFFERED_BODY_BYTES * 5 + 123, 'abcdefghij');

const STACK =
  'Error: connect ECONNREFUSED 10.0.3.7:27017\n    at /srv/pets/node_modules/mongodb/lib/sdam/topology.js:292:38';
const UPSTREAM_503 = JSON.stringify({
  code: 'upstream_unavailable',
  message: 'The database is unavailable',
  status: 503,
});
/** An HTML error page larger than the buffered size, a stack trace at each end. */
const LARGE_ERROR = Buffer.from(
  `<html><pre>${STACK}</pre>${'<p>padding</p>'.repeat(BUFFERED_BODY_BYTES / 8)}<pre>${STACK}</pre></html>`,
);

type Seen = { method?: string; headers: IncomingMessage['headers']; bodySha?: string; bodyBytes?: number };

/** A pets stand-in that answers by path, and records the last request it saw. */
class Upstream {
  last: Seen = { headers: {} };
  /** Called when an endless answer's connection is closed. */
  endlessClosed: (() => void) | undefined;
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.server?.closeAllConnections();
      this.server?.close(() => resolve());
    });
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
    });
    req.on('end', () => {
      this.last = { method: req.method, headers: req.headers, bodySha: hash.digest('hex'), bodyBytes: bytes };
      const path = req.url?.split('?')[0];
      switch (path) {
        case '/v1/pets/small':
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(SMALL) });
          res.end(SMALL);
          return;
        case '/v1/pets/large':
          // Written in pieces, with Content-Length, as a large list would come.
          res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': LARGE.length });
          for (let at = 0; at < LARGE.length; at += 70_001) res.write(LARGE.subarray(at, at + 70_001));
          res.end();
          return;
        case '/v1/pets/chunked':
          // No Content-Length: chunked, the length unknown until the end.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"part":1,');
          res.end('"part2":2}');
          return;
        case '/v1/pets/links':
          res.setHeader('link', ['</v1/pets?after=2>; rel="next"', '</v1/openapi.json>; rel="describedby"']);
          res.setHeader('content-type', 'application/json');
          res.end('{}');
          return;
        case '/v1/pets/leaky-headers':
          res.setHeader('set-cookie', ['session=upstream; Path=/']);
          res.setHeader('server', 'pets-internal/1.2 (db-7.internal)');
          res.setHeader('x-powered-by', 'Express');
          res.setHeader('retry-after', '3600');
          res.setHeader('x-internal-route', 'pets-7');
          res.setHeader('content-type', 'application/json');
          res.setHeader('etag', '"v1"');
          res.end('{}');
          return;
        case '/v1/pets/html-500':
          res.writeHead(500, {
            'content-type': 'text/html',
            'set-cookie': 'trace=abc; Path=/',
            server: 'pets-internal/1.2',
            'x-powered-by': 'Express',
            'retry-after': '120',
          });
          res.end(`<html><body><pre>${STACK}</pre></body></html>`);
          return;
        case '/v1/pets/text-404':
          res.writeHead(404, { 'content-type': 'text/plain', server: 'pets-internal/1.2' });
          res.end('Cannot GET /v1/pets/text-404 on pets-7.cluster.internal:8090');
          return;
        case '/v1/pets/error-503': {
          res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '30' });
          res.end(UPSTREAM_503);
          return;
        }
        case '/v1/pets/wrong-status-error':
          // The Error shape, but its status is not the HTTP one.
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ code: 'upstream_unavailable', message: 'at db-7.internal', status: 503 }));
          return;
        case '/v1/pets/large-500':
          res.writeHead(500, { 'content-type': 'text/html', 'content-length': LARGE_ERROR.length });
          res.end(LARGE_ERROR);
          return;
        case '/v1/pets/endless':
          // More than the buffered size at once, then more every few ms until someone hangs up.
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          res.write(LARGE.subarray(0, BUFFERED_BODY_BYTES * 2));
          {
            const more = setInterval(() => res.write(LARGE.subarray(0, 1024)), 5);
            res.once('close', () => {
              clearInterval(more);
              this.endlessClosed?.();
            });
          }
          return;
        case '/v1/pets/large-broken':
          res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': LARGE.length });
          res.write(LARGE.subarray(0, BUFFERED_BODY_BYTES * 2), () => setTimeout(() => req.socket.destroy(), 20));
          return;
        default:
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ method: req.method, url: req.url }));
      }
    });
  }
}

const upstream = new Upstream();
beforeAll(() => upstream.start());
afterAll(() => upstream.stop());

async function keyed(): Promise<{ gw: TestGateway; headers: Record<string, string> }> {
  const gw = await gateways.start({ upstream: upstream.url });
  const { key } = await addKey(gw.deps, 'pro');
  return { gw, headers: bearer(key) };
}

/** A raw HTTP/1.1 request to a listening gateway: the body as it arrived, or the error that broke it. */
function rawRequest(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: Buffer; chunked?: boolean } = {},
): Promise<{ status: number; headers: IncomingMessage['headers']; body?: Buffer; error?: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: init.method ?? 'GET', headers: init.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', (err) => resolve({ status: res.statusCode ?? 0, headers: res.headers, error: err.message }));
    });
    req.on('error', reject);
    if (init.body && init.chunked) {
      // Two writes without a declared length: Transfer-Encoding: chunked.
      req.write(init.body.subarray(0, 1000));
      req.end(init.body.subarray(1000));
    } else req.end(init.body);
  });
}

describe('answers on the way back', () => {
  it.each([
    ['a small answer (sent in one write)', '/v1/pets/small', Buffer.from(SMALL)],
    ['a large answer (streamed through)', '/v1/pets/large', LARGE],
    ['a chunked answer of unknown length', '/v1/pets/chunked', Buffer.from('{"part":1,"part2":2}')],
  ])(
    '%s arrives whole, with its own length and content type, and the gateway headers',
    async (_label, path, expected) => {
      const { gw, headers } = await keyed();
      const url = await gw.listen();
      const res = await rawRequest(`${url}${path}`, { headers });
      expect(res.status).toBe(200);
      expect(res.body?.equals(expected)).toBe(true);
      if (res.headers['content-length'] !== undefined)
        expect(Number(res.headers['content-length'])).toBe(expected.length);
      else expect(res.headers['transfer-encoding']).toBe('chunked');
      expect(res.headers['content-type']).toBe(
        path.endsWith('large') ? 'application/octet-stream' : 'application/json',
      );
      expect(res.headers['x-ratelimit-limit']).toBe('300');
      expect(res.headers['cache-control']).toBe('no-store');
    },
  );

  it('HEAD gets the length of the GET answer and no body', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ method: 'HEAD', url: '/v1/pets/small', headers });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(SMALL)));
    expect(res.body).toBe('');
    expect(upstream.last.method).toBe('HEAD');
  });

  it('a repeated field (Link) keeps every value', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ url: '/v1/pets/links', headers });
    expect(res.statusCode).toBe(200);
    expect(res.headers.link).toEqual(['</v1/pets?after=2>; rel="next"', '</v1/openapi.json>; rel="describedby"']);
  });

  it('only allow-listed upstream headers pass: never its cookies, Server, X-Powered-By or Retry-After', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ url: '/v1/pets/leaky-headers', headers });
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe('"v1"');
    expect(res.headers['content-type']).toBe('application/json');
    for (const name of ['set-cookie', 'server', 'x-powered-by', 'retry-after', 'x-internal-route']) {
      expect(res.headers[name], name).toBeUndefined();
    }
  });

  it('a large answer that breaks off mid-body breaks off at the client too: never a short body that looks whole', async () => {
    const { gw, headers } = await keyed();
    const url = await gw.listen();
    const res = await rawRequest(`${url}/v1/pets/large-broken`, { headers });
    expect(res.status).toBe(200);
    expect(res.error).toBeDefined();
    expect(res.body).toBeUndefined();
    // The gateway is fine afterwards.
    const after = await rawRequest(`${url}/v1/pets/small`, { headers });
    expect(after.status).toBe(200);
  });

  it('a client that hangs up mid-stream ends the upstream request too (not held until a timeout)', async () => {
    // An upstream timeout far beyond the test's: only the abort can end the upstream's answer.
    const gw = await gateways.start({ upstream: upstream.url, env: { UPSTREAM_TIMEOUT_MS: '600000' } });
    const { key } = await addKey(gw.deps, 'pro');
    const url = await gw.listen();
    const upstreamClosed = new Promise<void>((resolve) => {
      upstream.endlessClosed = resolve;
    });
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${url}/v1/pets/endless`, { headers: bearer(key) }, (res) => {
        expect(res.statusCode).toBe(200);
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (err) => (err.message === 'socket hang up' ? undefined : reject(err)));
      req.end();
    });
    await upstreamClosed;
  });
});

describe('requests on the way out', () => {
  it('a large body streams to the upstream intact, declared or chunked', async () => {
    const { gw, headers } = await keyed();
    const url = await gw.listen();
    const body = LARGE.subarray(0, 300_000);
    const sha = createHash('sha256').update(body).digest('hex');
    for (const chunked of [false, true]) {
      const res = await rawRequest(`${url}/v1/pets`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/octet-stream' },
        body,
        chunked,
      });
      expect(res.status, `chunked=${chunked}`).toBe(200);
      expect(upstream.last.bodyBytes).toBe(body.length);
      expect(upstream.last.bodySha).toBe(sha);
    }
  });

  it('headers the client names in Connection stay on its hop, and Host is the upstream', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({
      url: '/v1/pets',
      headers: {
        ...headers,
        connection: 'keep-alive, x-hop-secret',
        'x-hop-secret': 'only for the gateway',
        'x-kept': 'yes',
      },
    });
    expect(res.statusCode).toBe(200);
    expect(upstream.last.headers['x-hop-secret']).toBeUndefined();
    expect(upstream.last.headers['x-kept']).toBe('yes');
    expect(upstream.last.headers.host).toBe(new URL(upstream.url).host);
  });

  it('a GET never forwards a body (nor its length)', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({
      method: 'GET',
      url: '/v1/pets',
      headers: { ...headers, 'content-type': 'application/json' },
      payload: '{"ignored":true}',
    });
    expect(res.statusCode).toBe(200);
    expect(upstream.last.bodyBytes).toBe(0);
    expect(upstream.last.headers['content-length']).toBeUndefined();
  });
});

describe('upstream error answers', () => {
  function expectErrorBody(res: { statusCode: number; headers: Record<string, unknown>; body: string }) {
    expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
    const body = JSON.parse(res.body);
    expect(body).toEqual({ code: expect.any(String), message: expect.any(String), status: res.statusCode });
    for (const name of ['set-cookie', 'server', 'x-powered-by', 'retry-after']) {
      expect(res.headers[name], name).toBeUndefined();
    }
    expect(res.headers['x-ratelimit-limit']).toBe('300');
    expect(res.headers['cache-control']).toBe('no-store');
    return body as { code: string; message: string; status: number };
  }

  it('an HTML 500 with a stack trace becomes a 500 internal_error Error body, without the stack or its headers', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ url: '/v1/pets/html-500', headers });
    expect(res.statusCode).toBe(500);
    expect(expectErrorBody(res).code).toBe('internal_error');
    expect(res.body).not.toMatch(/ECONNREFUSED|10\.0\.3\.7|topology|<html|\/srv\//);
  });

  it('a text 404 naming an internal host becomes a 404 not_found Error body', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ url: '/v1/pets/text-404', headers });
    expect(res.statusCode).toBe(404);
    expect(expectErrorBody(res).code).toBe('not_found');
    expect(res.body).not.toContain('internal');
    expect(res.body).not.toContain('8090');
  });

  it('an Error body whose status is not the HTTP status is replaced too', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ url: '/v1/pets/wrong-status-error', headers });
    expect(res.statusCode).toBe(502);
    expect(expectErrorBody(res).code).toBe('upstream_unavailable');
    expect(res.body).not.toContain('db-7');
  });

  it('an upstream 503 Error body passes unchanged, status, bytes and the Retry-After it announces', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ url: '/v1/pets/error-503', headers });
    expect(res.statusCode).toBe(503);
    expect(res.body).toBe(UPSTREAM_503);
    expect(res.headers['retry-after']).toBe('30');
    expect(JSON.parse(res.body)).toMatchObject({ status: 503 });
    expect(res.headers['x-ratelimit-limit']).toBe('300');
  });

  it('an upstream error answer to HEAD passes with its status, not replaced nor counted as an upstream fault', async () => {
    const { gw, headers } = await keyed();
    const res = await gw.app.inject({ method: 'HEAD', url: '/v1/pets/text-404', headers });
    expect(res.statusCode).toBe(404);
    expect(res.body).toBe('');
    expect(res.headers.server).toBeUndefined();
    const metrics = await gw.deps.registry.metrics();
    expect(metrics).not.toMatch(/gateway_upstream_errors_total\{[^}]*kind="error_body"[^}]*\} [1-9]/);
  });

  it('an error body over the buffered size is replaced, never streamed through', async () => {
    const { gw, headers } = await keyed();
    const url = await gw.listen();
    const res = await rawRequest(`${url}/v1/pets/large-500`, { headers });
    expect(res.status).toBe(500);
    expect(res.error).toBeUndefined();
    const text = res.body?.toString() ?? '';
    expect(JSON.parse(text)).toEqual({ code: 'internal_error', message: expect.any(String), status: 500 });
    expect(text).not.toContain('ECONNREFUSED');
    expect(Number(res.headers['content-length'])).toBe(res.body?.length);
    // The gateway is fine afterwards.
    expect((await rawRequest(`${url}/v1/pets/small`, { headers })).status).toBe(200);
  });
});
