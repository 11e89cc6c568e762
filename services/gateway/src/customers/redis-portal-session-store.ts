import type { Redis, Result } from 'ioredis';
import type { RedisClient } from '../redis/clients.js';
import { FencedWrites } from '../redis/fenced-writes.js';
import {
  goneBy,
  idleEnd,
  type PortalSession,
  type PortalSessionStore,
  type SessionGone,
  type SessionTiming,
  secretName,
  TRACE_LINGER_MS,
  type Trace,
} from './portal-session-store.js';

/**
 * A session's read and its activity in one step. KEYS: the session; ARGV: now on the gateway's
 * clock, the idle time. Nothing unless its expiry (its idle end or absolute end, whichever is
 * first) is still ahead of now; then the expiry moves on to now + idle, capped at the absolute end
 * the value holds, and never back (GT: two uses at once cannot shorten it). In one script, so a
 * sign-out cannot fall between the read and the move.
 */
const USE_SESSION_SCRIPT = `
local held = redis.call('GET', KEYS[1])
if not held then return false end
local now = tonumber(ARGV[1])
if redis.call('PEXPIRETIME', KEYS[1]) <= now then return false end
local ends = math.min(now + tonumber(ARGV[2]), cjson.decode(held).expiresAt)
redis.call('PEXPIREAT', KEYS[1], string.format('%d', ends), 'GT')
return held
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewayPortalUseSession(key: string, now: number, idleMs: number): Result<string | null, Context>;
  }
}

/**
 * One string key per link and per session (`<prefix>portal:link:<hash>`, `…:session:<hash>`),
 * and a session's trace (`…:trace:<hash>`, for whyGone), each expiring with what it holds (PXAT):
 * any Cluster slot, and nothing to sweep. A link is taken with GETDEL, so
 * two visits of the same link at once sign in once. A session's key expires at its idle end,
 * which each use moves on (USE_SESSION_SCRIPT) up to the absolute end the value holds. Expiry is
 * decided on the gateway's clock, as PEXPIRETIME is compared with it; Redis's own expiry, on its
 * clock, is what clears the key.
 *
 * Links and sessions are written, taken and ended by fenced writes (redis/fenced-writes.ts): a call
 * answered 503 in a Redis stall leaves no link or session behind, takes no link (it still signs in
 * once Redis is back) and ends no session, however long Redis kept the command.
 */
export class RedisPortalSessionStore implements PortalSessionStore {
  readonly kind = 'redis';
  private readonly fences: FencedWrites;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly timing: SessionTiming,
  ) {
    // Stryker disable next-line ConditionalExpression,StringLiteral: defining the command again on a client is harmless
    if (typeof (redis as Partial<Redis>).gatewayPortalUseSession !== 'function') {
      redis.defineCommand('gatewayPortalUseSession', { numberOfKeys: 1, lua: USE_SESSION_SCRIPT });
    }
    this.fences = new FencedWrites(redis);
  }

  private name(kind: 'link' | 'session' | 'trace', secret: string): string {
    return `${this.prefix}portal:${kind}:${secretName(secret)}`;
  }

  async putLink(secret: string, customerId: string, expiresAt: number): Promise<void> {
    const key = this.name('link', secret);
    await this.fences.call(key, 'SET', customerId, 'PXAT', expiresAt);
  }

  async takeLink(secret: string): Promise<string | null> {
    const key = this.name('link', secret);
    return (await this.fences.call<string | null>(key, 'GETDEL')) ?? null;
  }

  async putSession(secret: string, session: PortalSession): Promise<void> {
    const ends = idleEnd(session, this.timing.now(), this.timing.idleMs);
    const trace: Trace = { until: session.expiresAt + TRACE_LINGER_MS };
    // The trace first, so no session is without one; not in one MULTI, as the two keys may be in
    // different Cluster slots. A sign-in failing between the two leaves a trace that only expires.
    await this.fences.call(this.name('trace', secret), 'SET', JSON.stringify(trace), 'PXAT', trace.until);
    await this.fences.call(this.name('session', secret), 'SET', JSON.stringify(session), 'PXAT', ends);
  }

  async getSession(secret: string): Promise<PortalSession | null> {
    const { now, idleMs } = this.timing;
    const held = await this.redis.gatewayPortalUseSession(this.name('session', secret), now(), idleMs);
    // Stryker disable next-line ConditionalExpression: JSON.parse(null) is null
    return held === null ? null : (JSON.parse(held) as PortalSession);
  }

  async endSession(secret: string): Promise<void> {
    await this.fences.call(this.name('session', secret), 'DEL');
    // Marked, not deleted, so a replay of the cookie is told apart from a guess; XX and KEEPTTL:
    // a trace is never made here, and keeps the end it was given at sign-in.
    const held = await this.redis.get(this.name('trace', secret));
    // Stryker disable next-line ConditionalExpression: JSON.parse(null) is null, and SET … XX makes no trace
    if (held === null) return;
    const trace: Trace = { ...(JSON.parse(held) as Trace), ended: true };
    await this.fences.call(this.name('trace', secret), 'SET', JSON.stringify(trace), 'KEEPTTL', 'XX');
  }

  async whyGone(secret: string): Promise<SessionGone> {
    const held = await this.redis.get(this.name('trace', secret));
    // Stryker disable next-line ConditionalExpression: JSON.parse(null) is null
    return goneBy(held === null ? null : (JSON.parse(held) as Trace), this.timing.now());
  }
}
