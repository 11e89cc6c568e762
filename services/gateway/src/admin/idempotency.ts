import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IdempotencyStore } from '../idempotency/idempotency-store.js';

/** How long a key's record is kept: a retry within a day gets the first answer (as Stripe's keys). */
const IDEMPOTENCY_TTL_MS = 86_400_000;

/** What the header may hold: 1 to 255 visible ASCII characters (a UUID is the usual choice). */
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * A write the admin API can repeat under an Idempotency-Key: planned once (ids, secrets, the
 * answer), made by `apply` as often as a retry or a concurrent duplicate asks, each time to the
 * same effect, and announced by `made` exactly once.
 */
export interface Repeatable<P> {
  /** Checks the request and draws ids and secrets. What it throws is answered as it is and not recorded. */
  plan(): Promise<{ plan: P; status: number; body: unknown }>;
  /** Makes the write for this plan; a second run for the same plan changes nothing more. */
  apply(plan: P): Promise<void>;
  /** Once per plan, when it is made: the audit line, the events. */
  made(plan: P): void;
  /** Without an Idempotency-Key, when apply failed: takes back what it may have written, best effort. */
  undo?(plan: P): Promise<void>;
}

interface Held {
  v: 1;
  /** SHA-256 of the method, path and body: a key reused for something else is refused. */
  fingerprint: string;
  state: 'pending' | 'done';
  /** The plan and the answer, sealed (AES-256-GCM) with a key derived from the Idempotency-Key. */
  sealed: string;
}

interface Planned<P> {
  plan: P;
  status: number;
  body: unknown;
}

/** JSON with every object's keys in order: the same body however its fields were ordered. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Idempotency-Key on the admin POSTs that create something (a key, a webhook endpoint) or give a
 * new secret (a key's rotation).
 *
 * The first request with a key records its plan (the ids and secrets it drew, and its answer)
 * before it writes anything, then makes the write, then marks the record done. A repeat with the
 * same key and body gets that answer again (for 24 h); one that finds the record still pending
 * (its first try failed half-way, or runs at this moment) makes the same write again, which
 * changes nothing more, so a create that failed is finished by its retry and two at once create
 * one thing. Only the request that marks the record done audits it. The same key with another
 * body is refused with 422.
 *
 * The answers hold secrets shown only once (a plaintext API key, a signing secret): the record
 * holds them sealed with AES-256-GCM under a key derived from the Idempotency-Key and the admin
 * token, so what Redis holds reveals no secret to anyone who does not have both, and it is gone
 * after 24 h. Records are found by the SHA-256 of the key, never the key itself.
 */
export class Idempotency {
  constructor(
    private readonly store: IdempotencyStore,
    private readonly adminToken: string,
  ) {}

  /** Runs `op` for the request, under its Idempotency-Key when it has one, and answers it. */
  async run<P>(request: FastifyRequest, reply: FastifyReply, op: Repeatable<P>): Promise<FastifyReply> {
    const key = idempotencyKey(request);
    const planned = await op.plan();
    if (key === undefined) {
      try {
        await op.apply(planned.plan);
      } catch (err) {
        await op.undo?.(planned.plan).catch(() => {});
        throw err;
      }
      op.made(planned.plan);
      return reply.code(planned.status).send(planned.body);
    }
    const path = request.url.split('?')[0];
    const fingerprint = sha256(`${request.method} ${path} ${canonical(request.body ?? null)}`);
    const secret = this.sealingKey(key);
    const pending: Held = { v: 1, fingerprint, state: 'pending', sealed: seal(secret, fingerprint, planned) };
    const recordKey = sha256(key);
    const heldText = await this.store.claim(recordKey, JSON.stringify(pending), IDEMPOTENCY_TTL_MS);
    let current = JSON.stringify(pending);
    let answer: Planned<P> = planned;
    if (heldText !== null) {
      const held = parseHeld(heldText);
      if (held.fingerprint !== fingerprint) {
        throw new ApiError(
          422,
          'idempotency_key_reused',
          'This Idempotency-Key was used for another request (another path or body); use a new key for this one',
        );
      }
      answer = open<P>(secret, fingerprint, held.sealed);
      if (held.state === 'done') return replay(reply, answer);
      current = heldText;
    }
    await op.apply(answer.plan);
    const done = JSON.stringify({ ...(JSON.parse(current) as Held), state: 'done' });
    // Whoever marks it done made it: the one audit line, however many ran it.
    if (await this.store.replace(recordKey, current, done)) op.made(answer.plan);
    // An answer planned by an earlier request is a replay, even when this one finished its write.
    return heldText === null ? reply.code(answer.status).send(answer.body) : replay(reply, answer);
  }

  private sealingKey(key: string): Buffer {
    return Buffer.from(hkdfSync('sha256', key, this.adminToken, 'animal-store admin idempotency', 32));
  }
}

function replay(reply: FastifyReply, answer: Planned<unknown>): FastifyReply {
  return reply.code(answer.status).header('idempotent-replayed', 'true').send(answer.body);
}

/** The request's Idempotency-Key, checked; undefined without one. */
function idempotencyKey(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !KEY_PATTERN.test(value)) {
    throw new ApiError(
      400,
      'invalid_request',
      'Idempotency-Key must be one header of 1 to 255 visible ASCII characters (a UUID, for instance)',
    );
  }
  return value;
}

function parseHeld(text: string): Held {
  const held = JSON.parse(text) as Held;
  if (held.v !== 1) throw new Error(`idempotency record of unknown version ${String(held.v)}`);
  return held;
}

function seal(key: Buffer, fingerprint: string, planned: Planned<unknown>): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(fingerprint));
  const text = Buffer.concat([cipher.update(JSON.stringify(planned), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), text]).toString('base64');
}

function open<P>(key: Buffer, fingerprint: string, sealed: string): Planned<P> {
  const bytes = Buffer.from(sealed, 'base64');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, 12));
    decipher.setAAD(Buffer.from(fingerprint));
    decipher.setAuthTag(bytes.subarray(12, 28));
    const text = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8');
    return JSON.parse(text) as Planned<P>;
  } catch {
    // Sealed under another admin token: the answer cannot be given again, nor the write made twice.
    throw new ApiError(
      409,
      'conflict',
      'This Idempotency-Key was used before the admin token changed: its answer cannot be read; use a new key',
    );
  }
}
