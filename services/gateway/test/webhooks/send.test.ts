import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import type { Lookup } from '../../src/webhooks/delivery/address-guard.js';
import { signedHeaders, WebhookSender } from '../../src/webhooks/delivery/send.js';

/**
 * One attempt as the receiver meets it (delivery/send.ts): the request it gets, the headers a
 * Standard Webhooks library verifies, and what the attempt reports. End to end through the queue:
 * webhooks.test.ts; the address checks at connect time: address-guard.test.ts.
 */

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const OLD_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
const AT = new Date(Date.UTC(2026, 10, 26, 12, 0, 0, 900));

describe('the signed headers of a delivery', () => {
  const body = JSON.stringify({ type: 'webhook.test', data: {} });

  it('carry the id, the timestamp in whole seconds, and a signature the receiver verifies', () => {
    // Now, 900 ms into its second: the receiver's library refuses timestamps far from its clock.
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 + 900);
    const headers = signedHeaders({ secret: SECRET }, 'msg_1', body, at);
    expect(headers).toEqual({
      'content-type': 'application/json',
      'user-agent': 'animal-store-gateway-webhooks',
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': expect.stringMatching(/^v1,\S+$/),
    });
    expect(new Webhook(SECRET).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(OLD_SECRET).verify(body, headers)).toThrow();
  });

  it('carry the old secret’s signature too until the instant its grace ends, not at it', () => {
    const until = (ms: number) => ({
      secret: SECRET,
      previousSecret: { secret: OLD_SECRET, expiresAt: new Date(ms).toISOString() },
    });
    const during = signedHeaders(until(AT.getTime() + 1), 'msg_2', body, AT)['webhook-signature'] as string;
    expect(during.split(' ')).toHaveLength(2);
    const [current, old] = during.split(' ') as [string, string];
    expect(current).toBe(signedHeaders({ secret: SECRET }, 'msg_2', body, AT)['webhook-signature']);
    expect(old).toBe(signedHeaders({ secret: OLD_SECRET }, 'msg_2', body, AT)['webhook-signature']);
    const ended = signedHeaders(until(AT.getTime()), 'msg_2', body, AT)['webhook-signature'] as string;
    expect(ended).toBe(current);
  });
});

describe('an attempt', () => {
  let server: Server | undefined;
  afterEach(() => {
    server?.closeAllConnections();
    server?.close();
    server = undefined;
  });
  const seen: Array<{ method?: string; url?: string; headers: IncomingHttpHeaders; body: string }> = [];
  async function receiver(status: number, answer = ''): Promise<string> {
    seen.length = 0;
    server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(status).end(answer);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook?x=1`;
  }
  /** A clock that moves 250 ms each time it is read. */
  const ticking = () => {
    let t = 1_000_000;
    return () => {
      t += 250;
      return t;
    };
  };
  const sender = (resolve?: Lookup) => {
    const s = new WebhookSender(2_000, true, ticking(), resolve);
    onTestFinished(() => s.close());
    return s;
  };

  it('POSTs the body with the headers given, and reports the status and how long it took', async () => {
    const url = await receiver(204);
    const result = await sender().send(url, { 'webhook-id': 'msg_3', 'content-type': 'application/json' }, '{"a":1}');
    expect(result).toEqual({ statusCode: 204, latencyMs: 250, error: null });
    expect(seen).toEqual([
      {
        method: 'POST',
        url: '/hook?x=1',
        headers: expect.objectContaining({ 'webhook-id': 'msg_3', 'content-type': 'application/json' }),
        body: '{"a":1}',
      },
    ]);
  });

  it.each([
    [299, null],
    [300, 'endpoint answered 300'],
    [410, 'endpoint answered 410'],
  ])('takes %i as %s', async (status, error) => {
    const url = await receiver(status, 'x'.repeat(200_000));
    expect(await sender().send(url, {}, '{}')).toEqual({ statusCode: status, latencyMs: 250, error });
  });

  it('reports a connection that failed by its code and reason, cut at 300 characters', async () => {
    const long: Lookup = async () => {
      throw Object.assign(new Error(`no such name ${'x'.repeat(400)}`), { code: 'ENOTFOUND' });
    };
    const result = await sender(long).send('http://hooks.nowhere.test/hook', {}, '{}');
    expect(result.statusCode).toBeNull();
    expect(result.latencyMs).toBe(250);
    expect(result.error).toHaveLength(300);
    expect(result.error).toMatch(/^ENOTFOUND: no such name x+$/);
    const bare: Lookup = async () => {
      throw new Error('resolver down');
    };
    expect((await sender(bare).send('http://hooks.nowhere.test/hook', {}, '{}')).error).toBe('error: resolver down');
  });
});
