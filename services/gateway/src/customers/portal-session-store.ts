import { createHash, randomBytes } from 'node:crypto';

/*
 * The portal's sign-in state: one-time links an operator's application asks for, and the sessions
 * they are exchanged for. Only hashes of the secrets are kept as names: whoever reads the store
 * (a dump, a replica) cannot sign in with what it finds.
 */

/** How long a sign-in link works: minutes, as the operator's application sends its user on at once. */
export const LINK_TTL_MS = 5 * 60_000;
/**
 * Where a sign-in link points: `<PORTAL_URL>/portal/enter?token=<secret>`. In the query, which
 * the access log never writes (common/access-log.ts), rather than the path, which it does.
 */
export const PORTAL_ENTRY = '/portal/enter';

/** What a session is: whose, its CSRF token, when it ends at the latest (epoch ms). */
export interface PortalSession {
  customerId: string;
  csrfToken: string;
  /** The absolute end, fixed at sign-in: no activity moves it. */
  expiresAt: number;
}

/** How a store tells time and idleness: the gateway's clock, and PORTAL_SESSION_IDLE_MS. */
export interface SessionTiming {
  now: () => number;
  idleMs: number;
}

/** When a session used at `at` idles out: `idleMs` on, never past its absolute end. */
export function idleEnd(session: Pick<PortalSession, 'expiresAt'>, at: number, idleMs: number): number {
  return Math.min(at + idleMs, session.expiresAt);
}

/**
 * Why a session secret names no live session: `ended` by sign-out, `expired` (idle too long or
 * past its hour), or `unknown` (never a session's, or ended longer ago than TRACE_LINGER_MS).
 */
export type SessionGone = 'ended' | 'expired' | 'unknown';

/**
 * How long past its absolute end a session's trace is kept: a cookie replayed after its hour is
 * still told `expired`, not `unknown`. The browser drops the cookie at the hour (its Max-Age).
 */
export const TRACE_LINGER_MS = 60 * 60_000;

/** A session's trace: until when it is kept (epoch ms, the gateway's clock), and whether it was ended. */
export interface Trace {
  until: number;
  ended?: true;
}

/** What a trace says of a session no longer live, at `now`. */
export function goneBy(trace: Trace | null | undefined, now: number): SessionGone {
  if (!trace || trace.until <= now) return 'unknown';
  return trace.ended ? 'ended' : 'expired';
}

export interface PortalSessionStore {
  readonly kind: 'redis' | 'memory';
  /** Keeps a one-time link for the customer until `expiresAt` (epoch ms). */
  putLink(secret: string, customerId: string, expiresAt: number): Promise<void>;
  /** The customer of a link, once: the link is gone after, and a link past its end is none. */
  takeLink(secret: string): Promise<string | null>;
  /** Keeps a session, live until it idles out (`idleMs` from now) or reaches its `expiresAt`. */
  putSession(secret: string, session: PortalSession): Promise<void>;
  /**
   * The live session of a cookie's secret, or null (unknown, ended, idle too long or past its
   * end). Asking is activity: a live session's idle end moves to `idleMs` from now, never past
   * its `expiresAt`, and never earlier than it was (two requests at once cannot shorten it).
   */
  getSession(secret: string): Promise<PortalSession | null>;
  /** Ends a session at once; nothing happens for one that is not there. */
  endSession(secret: string): Promise<void>;
  /**
   * Why a secret getSession answered null for names no session: asked only then, for the request
   * log. A read, never a write: an anonymous caller cannot make the store write by asking. Each
   * session leaves a trace (kept from sign-in to TRACE_LINGER_MS past its end, marked on
   * sign-out) for this; a session's trace holds no secret, only its hash as the name.
   */
  whyGone(secret: string): Promise<SessionGone>;
}

/** A new secret: 256 random bits, URL-safe. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** The name a secret is kept under. */
export function secretName(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url');
}

/** This process's memory: for a gateway without Redis (one replica) and the tests. */
export class MemoryPortalSessionStore implements PortalSessionStore {
  readonly kind = 'memory';
  private readonly links = new Map<string, { customerId: string; expiresAt: number }>();
  private readonly sessions = new Map<string, { session: PortalSession; idleEndsAt: number }>();
  private readonly traces = new Map<string, Trace>();
  private readonly now: () => number;
  private readonly idleMs: number;

  constructor({ now, idleMs }: SessionTiming) {
    this.now = now;
    this.idleMs = idleMs;
  }

  async putLink(secret: string, customerId: string, expiresAt: number): Promise<void> {
    // Stryker disable next-line CallExpression: every read checks the time itself; the sweep only frees memory
    this.sweep();
    this.links.set(secretName(secret), { customerId, expiresAt });
  }

  async takeLink(secret: string): Promise<string | null> {
    const name = secretName(secret);
    const link = this.links.get(name);
    this.links.delete(name);
    return link && link.expiresAt > this.now() ? link.customerId : null;
  }

  async putSession(secret: string, session: PortalSession): Promise<void> {
    // Stryker disable next-line CallExpression: every read checks the time itself; the sweep only frees memory
    this.sweep();
    this.sessions.set(secretName(secret), {
      session: { ...session },
      idleEndsAt: idleEnd(session, this.now(), this.idleMs),
    });
    this.traces.set(secretName(secret), { until: session.expiresAt + TRACE_LINGER_MS });
  }

  async getSession(secret: string): Promise<PortalSession | null> {
    const held = this.sessions.get(secretName(secret));
    const now = this.now();
    if (!held || held.idleEndsAt <= now) return null;
    held.idleEndsAt = Math.max(held.idleEndsAt, idleEnd(held.session, now, this.idleMs));
    return { ...held.session };
  }

  async endSession(secret: string): Promise<void> {
    const name = secretName(secret);
    this.sessions.delete(name);
    const trace = this.traces.get(name);
    if (trace) trace.ended = true;
  }

  async whyGone(secret: string): Promise<SessionGone> {
    return goneBy(this.traces.get(secretName(secret)), this.now());
  }

  /** Forgets what has expired, so abandoned links and sessions do not pile up. */
  // Stryker disable next-line BlockStatement: every read checks the time itself; the sweep only frees memory
  private sweep(): void {
    const now = this.now();
    // Stryker disable CallExpression: every read checks the time itself; the sweep only frees memory
    for (const [name, link] of this.links) if (link.expiresAt <= now) this.links.delete(name);
    for (const [name, held] of this.sessions) if (held.idleEndsAt <= now) this.sessions.delete(name);
    for (const [name, trace] of this.traces) if (trace.until <= now) this.traces.delete(name);
    // Stryker restore CallExpression
  }
}
