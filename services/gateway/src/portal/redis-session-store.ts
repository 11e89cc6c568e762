import type { RedisClient } from '../redis/clients.js';
import { type PortalSession, type PortalSessionStore, secretName } from './session-store.js';

/**
 * One string key per link and per session (`<prefix>portal:link:<hash>`, `…:session:<hash>`),
 * expiring with it (PXAT): any Cluster slot, and nothing to sweep. A link is taken with GETDEL, so
 * two visits of the same link at once sign in once.
 */
export class RedisPortalSessionStore implements PortalSessionStore {
  readonly kind = 'redis';

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  private name(kind: 'link' | 'session', secret: string): string {
    return `${this.prefix}portal:${kind}:${secretName(secret)}`;
  }

  async putLink(secret: string, customerId: string, expiresAt: number): Promise<void> {
    await this.redis.set(this.name('link', secret), customerId, 'PXAT', expiresAt);
  }

  async takeLink(secret: string): Promise<string | null> {
    return this.redis.getdel(this.name('link', secret));
  }

  async putSession(secret: string, session: PortalSession): Promise<void> {
    await this.redis.set(this.name('session', secret), JSON.stringify(session), 'PXAT', session.expiresAt);
  }

  async getSession(secret: string): Promise<PortalSession | null> {
    const held = await this.redis.get(this.name('session', secret));
    if (held === null) return null;
    const session = JSON.parse(held) as PortalSession;
    // Redis expires a key within a millisecond of PXAT; the answer never outlives the session.
    return session.expiresAt > Date.now() ? session : null;
  }

  async endSession(secret: string): Promise<void> {
    await this.redis.del(this.name('session', secret));
  }
}
