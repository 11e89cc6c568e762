import { describe, expect, it } from 'vitest';
import { newSecret, type PortalSessionStore } from '../../src/portal/session-store.js';

/** What every PortalSessionStore must do; `make` gives a fresh, empty store. */
export function portalSessionStoreContract(name: string, make: () => Promise<PortalSessionStore>): void {
  describe(`${name} (PortalSessionStore contract)`, () => {
    const later = () => Date.now() + 60_000;

    it('gives a link’s customer once, and none for a secret it never kept', async () => {
      const store = await make();
      const secret = newSecret();
      await store.putLink(secret, 'cus_a', later());
      expect(await store.takeLink(newSecret())).toBeNull();
      expect(await store.takeLink(secret)).toBe('cus_a');
      expect(await store.takeLink(secret)).toBeNull();
    });

    it('gives a link to one of many visits at once', async () => {
      const store = await make();
      const secret = newSecret();
      await store.putLink(secret, 'cus_a', later());
      const taken = await Promise.all(Array.from({ length: 20 }, () => store.takeLink(secret)));
      expect(taken.filter((c) => c === 'cus_a')).toHaveLength(1);
      expect(taken.filter((c) => c === null)).toHaveLength(19);
    });

    it('gives no link or session past its end', async () => {
      const store = await make();
      const [link, session] = [newSecret(), newSecret()];
      const past = Date.now() - 1;
      await store.putLink(link, 'cus_a', past);
      await store.putSession(session, { customerId: 'cus_a', csrfToken: 'c', expiresAt: past });
      expect(await store.takeLink(link)).toBeNull();
      expect(await store.getSession(session)).toBeNull();
    });

    it('keeps a session as it was put until it is ended, and each session apart', async () => {
      const store = await make();
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
      const store = await make();
      const secret = newSecret();
      await store.putLink(secret, 'cus_a', later());
      expect(await store.getSession(secret)).toBeNull();
      const other = newSecret();
      await store.putSession(other, { customerId: 'cus_a', csrfToken: 'c', expiresAt: later() });
      expect(await store.takeLink(other)).toBeNull();
    });
  });
}
