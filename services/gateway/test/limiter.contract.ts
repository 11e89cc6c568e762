import { afterEach, describe, expect, it } from 'vitest';
import type { BanPolicy, Decision, KeyLimiter } from '../src/limits/key-limiter.js';

export interface LimiterHarness {
  limiter: KeyLimiter;
  /** Ends the key's minute window now, as the passing of time would. */
  endMinuteWindow(keyId: string): Promise<void>;
  /** Ages the key's grace (BanPolicy.graceMs) past its end, as the passing of time would. */
  endGrace(keyId: string): Promise<void>;
  cleanup(): Promise<void>;
}

const BAN: BanPolicy = { threshold: 3, windowMs: 60_000, durationMs: 900_000, graceMs: 0 };
/** The default policy's shape: refusals in the first second after a window fills are no strikes. */
const GRACE: BanPolicy = { ...BAN, graceMs: 1_000 };

function window(decision: Decision, name: 'minute' | 'day') {
  const w = decision.windows.find((x) => x.name === name);
  if (!w) throw new Error(`no ${name} window`);
  return w;
}

let counter = 0;
const newKeyId = () => `key_contract_${process.pid}_${Date.now()}_${counter++}`;

/** The decision rules both limiters must follow identically (README, "Limits"). */
export function limiterContract(name: string, make: (ban: BanPolicy) => Promise<LimiterHarness>): void {
  describe(`${name} limiter contract`, () => {
    let harness: LimiterHarness | undefined;
    const start = async (ban = BAN) => {
      harness = await make(ban);
      return harness;
    };
    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    it('admits exactly the minute limit, counting down, then refuses with the time to the reset', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 5, perDay: 100 };
      const remaining: number[] = [];
      for (let i = 0; i < 5; i++) {
        const d = await limiter.consume(keyId, limits);
        expect(d.outcome).toBe('admitted');
        remaining.push(window(d, 'minute').remaining);
      }
      expect(remaining).toEqual([4, 3, 2, 1, 0]);
      const refused = await limiter.consume(keyId, limits);
      expect(refused.outcome).toBe('limited');
      if (refused.outcome !== 'limited') return;
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
      expect(window(refused, 'minute').remaining).toBe(0);
      expect(window(refused, 'day').remaining).toBe(95);
    });

    it('counts only admitted requests: minute refusals leave the day window alone', async () => {
      const { limiter, endMinuteWindow } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 3, perDay: 10 };
      for (let i = 0; i < 3; i++) await limiter.consume(keyId, limits);
      for (let i = 0; i < 3; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('limited');
      await endMinuteWindow(keyId);
      const next = await limiter.consume(keyId, limits);
      expect(next.outcome).toBe('admitted');
      expect(window(next, 'minute').remaining).toBe(2);
      expect(window(next, 'day').remaining).toBe(6);
    });

    it('lets the day window bind and refuse without consuming from the minute window', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 10, perDay: 5 };
      for (let i = 0; i < 5; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('admitted');
      const refused = await limiter.consume(keyId, limits);
      expect(refused.outcome).toBe('limited');
      if (refused.outcome !== 'limited') return;
      expect(window(refused, 'day').remaining).toBe(0);
      expect(window(refused, 'minute').remaining).toBe(5);
      // The wait is until the day window resets, far beyond a minute.
      expect(refused.retryAfterMs).toBeGreaterThan(60_000);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(86_400_000);
    });

    it(`bans a key after more than ${BAN.threshold} refusals, until the ban ends`, async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 1, perDay: 100 };
      expect((await limiter.consume(keyId, limits)).outcome).toBe('admitted');
      for (let i = 0; i < BAN.threshold; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('limited');
      const banned = await limiter.consume(keyId, limits);
      expect(banned.outcome).toBe('banned');
      if (banned.outcome !== 'banned') return;
      expect(banned.banEndsAt - Date.now()).toBeGreaterThan(BAN.durationMs - 5_000);
      expect(banned.banEndsAt - Date.now()).toBeLessThanOrEqual(BAN.durationMs + 1_000);
      expect((await limiter.consume(keyId, limits)).outcome).toBe('banned');
      expect(await limiter.banEndsAt(keyId)).toBeGreaterThan(Date.now());
    });

    it('lifting a ban also forgets the refusals counted towards the next one', async () => {
      const { limiter, endMinuteWindow } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 1, perDay: 100 };
      await limiter.consume(keyId, limits);
      for (let i = 0; i <= BAN.threshold; i++) await limiter.consume(keyId, limits);
      expect((await limiter.consume(keyId, limits)).outcome).toBe('banned');
      await limiter.liftBan(keyId);
      expect(await limiter.banEndsAt(keyId)).toBeNull();
      // Minute window still exhausted: refused, but the refusal count starts again from zero.
      for (let i = 0; i < BAN.threshold; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('limited');
      expect((await limiter.consume(keyId, limits)).outcome).toBe('banned');
      await limiter.liftBan(keyId);
      await endMinuteWindow(keyId);
      expect((await limiter.consume(keyId, limits)).outcome).toBe('admitted');
    });

    it('counts no refusal in the grace after a window fills: 50 clients refused at once are not banned', async () => {
      const { limiter } = await start(GRACE);
      const keyId = newKeyId();
      const limits = { perMinute: 10, perDay: 100 };
      const decisions = await Promise.all(Array.from({ length: 60 }, () => limiter.consume(keyId, limits)));
      const outcomes = decisions.map((d) => d.outcome);
      expect(outcomes.filter((o) => o === 'admitted')).toHaveLength(10);
      expect(outcomes.filter((o) => o === 'limited')).toHaveLength(50);
      expect(await limiter.banEndsAt(keyId)).toBeNull();
      expect((await limiter.usage(keyId)).refusals).toBe(0);
    });

    it(`bans a key whose client keeps sending past the grace: more than ${GRACE.threshold} refusals after it`, async () => {
      const { limiter, endGrace } = await start(GRACE);
      const keyId = newKeyId();
      const limits = { perMinute: 1, perDay: 100 };
      expect((await limiter.consume(keyId, limits)).outcome).toBe('admitted');
      for (let i = 0; i < 20; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('limited');
      await endGrace(keyId);
      for (let i = 0; i < GRACE.threshold; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('limited');
      expect((await limiter.consume(keyId, limits)).outcome).toBe('banned');
    });

    it('starts a new grace each time a window fills again', async () => {
      const { limiter, endGrace, endMinuteWindow } = await start(GRACE);
      const keyId = newKeyId();
      const limits = { perMinute: 1, perDay: 100 };
      await limiter.consume(keyId, limits);
      await endGrace(keyId);
      for (let i = 0; i < GRACE.threshold; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('limited');
      await endMinuteWindow(keyId);
      expect((await limiter.consume(keyId, limits)).outcome).toBe('admitted');
      // The window is full again: its first refusals are in a grace of their own.
      for (let i = 0; i < 20; i++) expect((await limiter.consume(keyId, limits)).outcome).toBe('limited');
    });

    it('keeps keys apart', async () => {
      const { limiter } = await start();
      const [a, b] = [newKeyId(), newKeyId()];
      const limits = { perMinute: 1, perDay: 10 };
      expect((await limiter.consume(a, limits)).outcome).toBe('admitted');
      expect((await limiter.consume(a, limits)).outcome).toBe('limited');
      expect((await limiter.consume(b, limits)).outcome).toBe('admitted');
    });

    it('admits exactly the limit under 150 concurrent requests', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 60, perDay: 1_000 };
      const decisions = await Promise.all(Array.from({ length: 150 }, () => limiter.consume(keyId, limits)));
      const outcomes = decisions.map((d) => d.outcome);
      expect(outcomes.filter((o) => o === 'admitted')).toHaveLength(60);
      // 90 refusals pass the ban threshold: the first few are limited, the rest banned.
      expect(outcomes.filter((o) => o === 'limited')).toHaveLength(BAN.threshold);
      expect(outcomes.filter((o) => o === 'banned')).toHaveLength(90 - BAN.threshold);
      const after = await limiter.consume(newKeyId(), limits);
      expect(window(after, 'day').remaining).toBe(999);
      const dayRemaining = decisions.map((d) => window(d, 'day').remaining);
      expect(Math.min(...dayRemaining)).toBe(940);
    });
  });
}
