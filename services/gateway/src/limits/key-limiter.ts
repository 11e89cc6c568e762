import type { Limits } from '../plans.js';

/** One window's state after a decision; `resetAt` is epoch milliseconds. */
export interface WindowState {
  name: 'minute' | 'day' | 'anonymous';
  limit: number;
  remaining: number;
  windowSeconds: number;
  resetAt: number;
}

export type Decision =
  | { outcome: 'admitted'; windows: WindowState[] }
  | { outcome: 'limited'; windows: WindowState[]; retryAfterMs: number }
  | {
      outcome: 'banned';
      windows: WindowState[];
      banEndsAt: number;
      /** Set on the one decision that started the ban: how many refusals it took. */
      started?: { refusals: number };
    };

/**
 * Ban policy: more than `threshold` refusals within `windowMs` bans the key for `durationMs`.
 * Refusals within `graceMs` of the first one since a window filled are not counted: clients that
 * share a key each receive a 429 then, and a client honouring Retry-After sends nothing after it.
 */
export interface BanPolicy {
  threshold: number;
  windowMs: number;
  durationMs: number;
  graceMs: number;
}

/** One window's count as the limiter holds it; `resetAt` (epoch ms) is null until the window starts. */
export interface WindowUsage {
  used: number;
  resetAt: number | null;
}

/** A key's live limiter state, for support to answer "why do I get 429?". */
export interface KeyUsage {
  minute: WindowUsage;
  day: WindowUsage;
  /** When the key's ban ends (epoch ms), or null when not banned. */
  banEndsAt: number | null;
  /** Refusals counted toward a ban right now. */
  refusals: number;
}

/** Decides whether a key may make one more request; shared by all replicas when backed by Redis. */
export interface KeyLimiter {
  consume(keyId: string, limits: Limits): Promise<Decision>;
  /** Lifts a ban and forgets the key's refusals. */
  liftBan(keyId: string): Promise<void>;
  /** When the key's ban ends (epoch ms), or null when not banned. */
  banEndsAt(keyId: string): Promise<number | null>;
  /** Reads the key's windows, ban and refusals; never counts as a request. */
  usage(keyId: string): Promise<KeyUsage>;
}

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

export function windowsFor(
  limits: Limits,
  minuteCount: number,
  minuteTtlMs: number,
  dayCount: number,
  dayTtlMs: number,
  now: number,
): WindowState[] {
  return [
    {
      name: 'minute',
      limit: limits.perMinute,
      remaining: Math.max(0, limits.perMinute - minuteCount),
      windowSeconds: 60,
      resetAt: now + (minuteTtlMs > 0 ? minuteTtlMs : MINUTE_MS),
    },
    {
      name: 'day',
      limit: limits.perDay,
      remaining: Math.max(0, limits.perDay - dayCount),
      windowSeconds: 86_400,
      resetAt: now + (dayTtlMs > 0 ? dayTtlMs : DAY_MS),
    },
  ];
}

/** How long until every exhausted window has reset: the earliest moment a retry can succeed. */
export function retryAfterMs(windows: WindowState[], now: number): number {
  let wait = 0;
  for (const w of windows) if (w.remaining === 0) wait = Math.max(wait, w.resetAt - now);
  return Math.max(wait, 1);
}
