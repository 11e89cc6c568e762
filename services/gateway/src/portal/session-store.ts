import { createHash, randomBytes } from 'node:crypto';

/*
 * The portal's sign-in state: one-time links an operator's application asks for, and the sessions
 * they are exchanged for. Only hashes of the secrets are kept as names: whoever reads the store
 * (a dump, a replica) cannot sign in with what it finds.
 */

/** What a session is: whose, its CSRF token, when it ends (epoch ms). */
export interface PortalSession {
  customerId: string;
  csrfToken: string;
  expiresAt: number;
}

export interface PortalSessionStore {
  readonly kind: 'redis' | 'memory';
  /** Keeps a one-time link for the customer until `expiresAt` (epoch ms). */
  putLink(secret: string, customerId: string, expiresAt: number): Promise<void>;
  /** The customer of a link, once: the link is gone after, and a link past its end is none. */
  takeLink(secret: string): Promise<string | null>;
  putSession(secret: string, session: PortalSession): Promise<void>;
  /** The live session of a cookie's secret, or null (unknown, ended or expired). */
  getSession(secret: string): Promise<PortalSession | null>;
  /** Ends a session at once; nothing happens for one that is not there. */
  endSession(secret: string): Promise<void>;
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
  private readonly sessions = new Map<string, PortalSession>();

  constructor(private readonly now: () => number = Date.now) {}

  async putLink(secret: string, customerId: string, expiresAt: number): Promise<void> {
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
    this.sweep();
    this.sessions.set(secretName(secret), { ...session });
  }

  async getSession(secret: string): Promise<PortalSession | null> {
    const session = this.sessions.get(secretName(secret));
    return session && session.expiresAt > this.now() ? { ...session } : null;
  }

  async endSession(secret: string): Promise<void> {
    this.sessions.delete(secretName(secret));
  }

  /** Forgets what has expired, so abandoned links and sessions do not pile up. */
  private sweep(): void {
    const now = this.now();
    for (const [name, link] of this.links) if (link.expiresAt <= now) this.links.delete(name);
    for (const [name, session] of this.sessions) if (session.expiresAt <= now) this.sessions.delete(name);
  }
}
