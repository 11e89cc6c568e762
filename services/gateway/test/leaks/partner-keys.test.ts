import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PartnerKeys } from '../../src/leaks/partner-keys.js';

/** The scanner's keys document, read through the reader given, kept and read again on the clock given. */

const pair = () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const entry = (id: string, key: KeyObject) => ({
  key_identifier: id,
  key: key.export({ type: 'spki', format: 'pem' }),
});
const body = Buffer.from('[{"token":"ask_x","type":"t"}]');
const signed = (key: KeyObject) => sign('sha256', body, { key, dsaEncoding: 'der' }).toString('base64');

describe('PartnerKeys', () => {
  it('keeps the document for its TTL, and reads it again for an unknown identifier at most once a minute', async () => {
    const first = pair();
    const second = pair();
    let document = { public_keys: [entry('k1', first.publicKey)] };
    let reads = 0;
    let at = 1_000_000;
    const keys = new PartnerKeys(
      async () => {
        reads++;
        return document;
      },
      3_600_000,
      () => at,
    );
    expect(await keys.verify('k1', signed(first.privateKey), body)).toBe(true);
    expect(await keys.verify('k1', signed(first.privateKey), body)).toBe(true);
    expect(reads).toBe(1);

    // GitHub adds a key before it signs with it.
    document = { public_keys: [entry('k1', first.publicKey), entry('k2', second.publicKey)] };
    expect(await keys.verify('k2', signed(second.privateKey), body)).toBe(false);
    expect(reads).toBe(1);
    at += 60_000;
    expect(await keys.verify('k2', signed(second.privateKey), body)).toBe(true);
    expect(reads).toBe(2);

    at += 3_600_000;
    await keys.verify('k1', signed(first.privateKey), body);
    expect(reads).toBe(3);
  });

  it('refuses a signature by another key, of another body, or not DER at all', async () => {
    const { publicKey, privateKey } = pair();
    const keys = new PartnerKeys(async () => ({ public_keys: [entry('k1', publicKey)] }), 3_600_000, Date.now);
    expect(await keys.verify('k1', signed(pair().privateKey), body)).toBe(false);
    expect(await keys.verify('k1', signed(privateKey), Buffer.from('[]'))).toBe(false);
    expect(await keys.verify('k1', Buffer.from('not a signature').toString('base64'), body)).toBe(false);
    expect(await keys.verify('k9', signed(privateKey), body)).toBe(false);
  });

  it('throws when the document has no public_keys', async () => {
    const keys = new PartnerKeys(async () => ({ keys: [] }), 3_600_000, Date.now);
    await expect(keys.verify('k1', 'c2ln', body)).rejects.toThrow(/public_keys/);
  });
});
