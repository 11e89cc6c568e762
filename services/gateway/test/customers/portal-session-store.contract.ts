import { describe, expect, it } from 'vitest';
import {
  newSecret,
  type PortalSessionStore,
  type SessionTiming,
  TRACE_LINGER_MS,
} from '../../src/customers/portal-session-store.js';

const MINUTE = 60_000;
/** The idle time every store is made with here. */
export const IDLE_MS = 15 * MINUTE;

/** A clock the test moves; it starts at the wall clock, so what a store sets in Redis is never behind it. */
function fakeClock(): { now: () => number; advance: (ms: number) => void } {
  let at = Date.now();
  return {
    now: () => at,
    advance: (ms) => {
      at += ms;
    },
  };
}

/**
 * What every PortalSessionStore must do; `make` gives a fresh, empty store on the timing given.
 * Time is a clock the test moves (no waiting): a store decides expiry on the gateway's clock.
 */
export function portalSessionStoreContract(
  name: string,
  make: (timing: SessionTiming) => Promise<PortalSessionStore>,
): void {
  describe(`${name} (PortalSessionStore contract)`, () => {
    const later = () => Date.now() + 60_000;
    const fresh = () => {
      const clock = fakeClock();
      return { clock, store: make({ now: clock.now, idleMs: IDLE_MS }) };
    };

    it('gives a link’s customer once, and none for a secret it never kept', async () => {
      const store = await fresh().store;
      const secret = newSecret();
      await store.putLink(secret, 'cus_a', later());
      expect(await store.takeLink(newSecret())).toBeNull();
      expect(await store.takeLink(secret)).toBe('cus_a');
      expect(await store.takeLink(secret)).toBeNull();
    });

    it('gives a link to one of many visits at once', async () => {
      const store = await fresh().store;
      const secret = newSecret();
      await store.putLink(secret, 'cus_a', later());
      const taken = await Promise.all(Array.from({ length: 20 }, () => store.takeLink(secret)));
      expect(taken.filter((c) => c === 'cus_a')).toHaveLength(1);
      expect(taken.filter((c) => c === null)).toHaveLength(19);
    });

    it('keeps each link apart: a second link leaves the first to be taken', async () => {
      const store = await fresh().store;
      const [a, b] = [newSecret(), newSecret()];
      await store.putLink(a, 'cus_a', later());
      await store.putLink(b, 'cus_b', later());
      expect(await store.takeLink(a)).toBe('cus_a');
      expect(await store.takeLink(b)).toBe('cus_b');
    });

    // A link's end at the millisecond is the memory store's test alone: Redis ends a link by its own clock.
    it('gives no session at the very millisecond of its end', async () => {
      const { clock, store: made } = fresh();
      const store = await made;
      const session = newSecret();
      await store.putSession(session, { customerId: 'cus_a', csrfToken: 'c', expiresAt: clock.now() });
      expect(await store.getSession(session)).toBeNull();
      expect(await store.whyGone(session)).toBe('expired');
    });

    it('gives no link or session past its end', async () => {
      const { clock, store: made } = fresh();
      const store = await made;
      const [link, session] = [newSecret(), newSecret()];
      // Past on the store's clock (the wall clock may have moved on since it was read).
      const past = clock.now() - 1;
      await store.putLink(link, 'cus_a', past);
      await store.putSession(session, { customerId: 'cus_a', csrfToken: 'c', expiresAt: past });
      expect(await store.takeLink(link)).toBeNull();
      expect(await store.getSession(session)).toBeNull();
    });

    it('keeps a session as it was put until it is ended, and each session apart', async () => {
      const store = await fresh().store;
      const [a, b] = [newSecret(), newSecret()];
      const session = { customerId: 'cus_a', csrfToken: 'csrf-a', expiresAt: later() };
      await store.putSession(a, session);
      await store.putSession(b, { ...session, customerId: 'cus_b' });
      expect(await store.getSession(a)).toEqual(session);
      expect(await store.getSession(newSecret())).toBeNull();
      await store.endSession(a);
      await store.endSession(newSecret());
      expect(await store.getSession(a)).toBeNull();
      expect(await store.getSession(b)).toMatchObject({ customerId: 'cus_b' });
    });

    it('does not take a session’s secret for a link, nor a link’s for a session', async () => {
      const store = await fresh().store;
      const secret = newSecret();
      await store.putLink(secret, 'cus_a', later());
      expect(await store.getSession(secret)).toBeNull();
      const other = newSecret();
      await store.putSession(other, { customerId: 'cus_a', csrfToken: 'c', expiresAt: later() });
      expect(await store.takeLink(other)).toBeNull();
    });

    it('ends a session left idle for its idle time, however far its absolute end', async () => {
      const { clock, store: made } = fresh();
      const store = await made;
      const secret = newSecret();
      await store.putSession(secret, { customerId: 'cus_a', csrfToken: 'c', expiresAt: clock.now() + 60 * MINUTE });
      clock.advance(IDLE_MS - 1);
      expect(await store.getSession(secret)).toMatchObject({ customerId: 'cus_a' });
      // That use moved the idle end on: IDLE_MS from it, not from sign-in.
      clock.advance(IDLE_MS - 1);
      expect(await store.getSession(secret)).toMatchObject({ customerId: 'cus_a' });
      clock.advance(IDLE_MS);
      expect(await store.getSession(secret)).toBeNull();
      // And it stays ended: a use after the idle end does not bring it back.
      expect(await store.getSession(secret)).toBeNull();
    });

    it('extends a used session up to its absolute end, never past it', async () => {
      const { clock, store: made } = fresh();
      const store = await made;
      const secret = newSecret();
      const expiresAt = clock.now() + 60 * MINUTE;
      await store.putSession(secret, { customerId: 'cus_a', csrfToken: 'c', expiresAt });
      // A use every 10 minutes keeps it through its hour…
      for (let used = 0; used < 5; used++) {
        clock.advance(10 * MINUTE);
        expect(await store.getSession(secret)).toMatchObject({ expiresAt });
      }
      clock.advance(10 * MINUTE - 1);
      expect(await store.getSession(secret)).toMatchObject({ expiresAt });
      // …and not a millisecond more, though the last use was a moment ago.
      clock.advance(1);
      expect(await store.getSession(secret)).toBeNull();
    });

    it('never moves an idle end back: a use read on an earlier clock (a slower request) keeps the later end', async () => {
      const { clock, store: made } = fresh();
      const store = await made;
      const secret = newSecret();
      await store.putSession(secret, { customerId: 'cus_a', csrfToken: 'c', expiresAt: clock.now() + 60 * MINUTE });
      clock.advance(10 * MINUTE);
      expect(await store.getSession(secret)).not.toBeNull();
      // A request that read the clock 5 minutes earlier arrives now: its idle end would be sooner.
      clock.advance(-5 * MINUTE);
      expect(await store.getSession(secret)).not.toBeNull();
      // Still live 10 + 15 minutes from sign-in, not 5 + 15.
      clock.advance(5 * MINUTE + IDLE_MS - 1);
      expect(await store.getSession(secret)).not.toBeNull();
    });

    it('answers many uses at once alike, keeps the idle end from them, and nothing after sign-out', async () => {
      const { clock, store: made } = fresh();
      const store = await made;
      const secret = newSecret();
      await store.putSession(secret, { customerId: 'cus_a', csrfToken: 'c', expiresAt: clock.now() + 60 * MINUTE });
      clock.advance(5 * MINUTE);
      const used = await Promise.all(Array.from({ length: 10 }, () => store.getSession(secret)));
      expect(used.every((s) => s?.customerId === 'cus_a')).toBe(true);
      clock.advance(IDLE_MS - 1);
      expect(await store.getSession(secret)).not.toBeNull();
      await store.endSession(secret);
      expect(await Promise.all([store.getSession(secret), store.getSession(secret)])).toEqual([null, null]);
    });

    it('says why a secret names no session: ended by sign-out, expired, or unknown (never one, or long gone)', async () => {
      const { clock, store: made } = fresh();
      const store = await made;
      const [ended, idle, hour] = [newSecret(), newSecret(), newSecret()];
      const expiresAt = clock.now() + 60 * MINUTE;
      for (const secret of [ended, idle, hour])
        await store.putSession(secret, { customerId: 'cus_a', csrfToken: 'c', expiresAt });
      expect(await store.whyGone(newSecret())).toBe('unknown');
      await store.endSession(ended);
      expect(await store.getSession(ended)).toBeNull();
      expect(await store.whyGone(ended)).toBe('ended');
      // Used every ten minutes, `hour` lives to its end; `idle`, never used, idles out.
      for (let used = 0; used < 6; used++) {
        clock.advance(10 * MINUTE);
        await store.getSession(hour);
      }
      expect(await store.getSession(idle)).toBeNull();
      expect(await store.getSession(hour)).toBeNull();
      expect(await store.whyGone(idle)).toBe('expired');
      expect(await store.whyGone(hour)).toBe('expired');
      expect(await store.whyGone(ended)).toBe('ended');
      // Asking writes nothing: a trace is not made by asking, and is still unknown after.
      const asked = newSecret();
      expect(await store.whyGone(asked)).toBe('unknown');
      expect(await store.getSession(asked)).toBeNull();
      // Until an hour past the session's end; then the traces are gone with it.
      clock.advance(TRACE_LINGER_MS - 1);
      expect(await store.whyGone(idle)).toBe('expired');
      clock.advance(1);
      for (const secret of [ended, idle, hour]) expect(await store.whyGone(secret)).toBe('unknown');
    });
  });
}
