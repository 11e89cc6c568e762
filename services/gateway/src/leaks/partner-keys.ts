import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import { readFile } from 'node:fs/promises';

/**
 * GitHub's partner public keys document (https://api.github.com/meta/public_keys/secret_scanning):
 * each key a PEM of an ECDSA P-256 public key, named by `key_identifier`.
 */
export interface PartnerKeysDocument {
  public_keys: Array<{ key_identifier: string; key: string; is_current?: boolean }>;
}

/** Reads the document: a file, or an https URL (the operator's setting, LEAK_PUBLIC_KEYS). */
export type KeysReader = () => Promise<unknown>;

export function keysReader(source: string, timeoutMs = 5_000): KeysReader {
  if (/^https:\/\//i.test(source)) {
    return async () => {
      const res = await fetch(source, {
        signal: AbortSignal.timeout(timeoutMs),
        headers: { accept: 'application/json' },
      });
      if (!res.ok) throw new Error(`partner keys: ${source} answered ${res.status}`);
      return res.json();
    };
  }
  return async () => JSON.parse(await readFile(source, 'utf8'));
}

function parseDocument(value: unknown): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  const list = (value as PartnerKeysDocument | null)?.public_keys;
  if (!Array.isArray(list)) throw new Error('partner keys: the document has no public_keys array');
  for (const entry of list) {
    if (typeof entry?.key_identifier !== 'string' || typeof entry.key !== 'string') continue;
    keys.set(entry.key_identifier, createPublicKey(entry.key));
  }
  return keys;
}

/**
 * The keys a report's signature is checked against, read once and kept `ttlMs`. An identifier
 * the cached document lacks reads it again (GitHub adds a key before signing with it), at most
 * once a minute, so unknown identifiers cannot make the gateway fetch on every request.
 */
export class PartnerKeys {
  private keys: Map<string, KeyObject> | undefined;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<Map<string, KeyObject>> | undefined;

  constructor(
    private readonly read: KeysReader,
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  private load(): Promise<Map<string, KeyObject>> {
    this.reading ??= this.read()
      .then(parseDocument)
      .then((keys) => {
        this.keys = keys;
        this.readAt = this.now();
        return keys;
      })
      .finally(() => {
        this.reading = undefined;
      });
    return this.reading;
  }

  private async keyFor(identifier: string): Promise<KeyObject | undefined> {
    const age = this.now() - this.readAt;
    if (!this.keys || age >= this.ttlMs) return (await this.load()).get(identifier);
    const key = this.keys.get(identifier);
    if (key || age < 60_000) return key;
    return (await this.load()).get(identifier);
  }

  /**
   * Whether `signature` (base64 of a DER ECDSA signature) signs the raw `body` with SHA-256
   * under the key named `identifier`. Throws when the document cannot be read.
   */
  async verify(identifier: string, signature: string, body: Buffer): Promise<boolean> {
    const key = await this.keyFor(identifier);
    if (!key) return false;
    try {
      return verify('sha256', body, { key, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
    } catch {
      // A signature that is not DER at all.
      return false;
    }
  }
}
