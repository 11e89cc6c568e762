import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import type { Subscription } from '../subscriptions/webhook-store.js';
import { guardedLookup, type Lookup } from './address-guard.js';

export interface AttemptResult {
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
}

/** Standard Webhooks headers for one body: signed with the secret, and the previous one while it lasts. */
export function signedHeaders(
  subscription: Pick<Subscription, 'secret' | 'previousSecret'>,
  eventId: string,
  body: string,
  at: Date,
): Record<string, string> {
  const signatures = [new Webhook(subscription.secret).sign(eventId, at, body)];
  const previous = subscription.previousSecret;
  if (previous && Date.parse(previous.expiresAt) > at.getTime()) {
    signatures.push(new Webhook(previous.secret).sign(eventId, at, body));
  }
  return {
    'content-type': 'application/json',
    'user-agent': 'animal-store-gateway-webhooks',
    'webhook-id': eventId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    // Receivers accept any listed signature that verifies: space-separated, as the spec allows.
    'webhook-signature': signatures.join(' '),
  };
}

/**
 * Posts bodies to endpoints over its own connection pool: no redirects followed (a 3xx is a
 * failure, so a redirect cannot lead to a forbidden address), every attempt bounded, and each
 * socket's address checked as it is dialled.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(
    private readonly timeoutMs: number,
    allowPrivate: boolean,
    private readonly now: () => number = Date.now,
    /** Resolves endpoint names instead of the system resolver. */
    resolve?: Lookup,
  ) {
    this.agent = new Agent({
      connect: { timeout: timeoutMs, lookup: guardedLookup(allowPrivate, resolve) },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connections: 16,
    });
  }

  async send(url: string, headers: Record<string, string>, body: string): Promise<AttemptResult> {
    const started = this.now();
    try {
      const response = await request(url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.agent,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      // The answer's body means nothing to us; it is read (at most what arrives in time) and dropped.
      await response.body.dump({ limit: 64 * 1024 }).catch(() => {});
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return {
        statusCode: response.statusCode,
        latencyMs: this.now() - started,
        error: ok ? null : `endpoint answered ${response.statusCode}`,
      };
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
      const detail = e.cause?.message ?? e.message ?? String(err);
      return {
        statusCode: null,
        latencyMs: this.now() - started,
        error: `${e.cause?.code ?? e.code ?? 'error'}: ${detail}`.slice(0, 300),
      };
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
