import type { FastifyBaseLogger } from 'fastify';
import type { CustomerRecord } from '../../customers/customer-store.js';
import type { KeyRecord } from '../../keys/key-store.js';
import type { CreditBatch, WindowState } from '../../limits/key-limiter.js';
import type { CustomerChange, CustomerEventRef, CustomerRef, KeyChange, KeyRef } from '../event-types.js';
import type { FanOut } from '../fan-out.js';
import { creditCrossings } from './credit-crossings.js';
import { expiryNotice, noticeWindow } from './expiry-notices.js';
import { quotaCrossings } from './quota-crossings.js';

/** The customer a customer event is about, as the change left it. */
export type EventCustomer = Pick<CustomerRecord, 'id' | 'name' | 'plan' | 'externalId'>;

/** Audit fields a key event may carry: what changed, when something ends; never a secret. */
const KEY_CHANGE_FIELDS = [
  'changed',
  'expiresAt',
  'previousKeyExpiresAt',
  // A leak report's (api/leak-handler.ts): where it was found and what it did.
  'leakId',
  'reporter',
  'source',
  'url',
  'type',
  'response',
  'leakedSecretEndsAt',
];

/** Audit fields a customer event may carry: what changed, the plan it moved from and to, the keys revoked with it. */
const CUSTOMER_CHANGE_FIELDS = ['changed', 'from', 'to', 'revokedKeys'];

function picked(fields: Record<string, unknown>, names: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([k]) => names.includes(k)));
}

/** Where the expiry scan finds keys: the key store and API_KEYS_FILE. */
export interface KeySource {
  get(id: string): Promise<KeyRecord | null>;
  /** Live keys whose expiry falls in [from, to]. */
  expiringBetween(from: Date, to: Date): Promise<KeyRecord[]>;
}

/**
 * What happens to keys, as webhook events: quota thresholds crossed and bans started (the gate),
 * admin changes (the audit), expiries (the scan). Hands each to the fan-out; never throws.
 */
export class KeyEvents {
  constructor(
    private readonly fanOut: FanOut,
    private readonly keys: KeySource,
    private readonly percents: readonly number[],
    private readonly logger: FastifyBaseLogger,
    private readonly now: () => number,
  ) {}

  /** After an admitted request (gate/apply-decision.ts): quota events for thresholds it crossed. */
  onAdmitted(record: KeyRecord, windows: readonly WindowState[], cost: number): void {
    const crossed = quotaCrossings(windows, cost, this.percents);
    if (!crossed) return;
    const at = this.now();
    for (const quota of crossed) {
      // A customer's window is the customer's: one event per crossing for it, not one per key.
      const shared = quota.scope === 'customer' && record.customerId !== undefined;
      const owner = shared ? `${record.customerId}.customer` : record.id;
      const marker = `quota.${owner}.${quota.window}.${Date.parse(quota.resetAt)}.${quota.threshold}`;
      void this.fanOut.emit(
        quota.threshold === 100 ? 'key.quota.exhausted' : 'key.quota.warning',
        keyRef(record),
        shared ? { ...quota, customerId: record.customerId } : quota,
        {
          marker,
          ttlMs: Date.parse(quota.resetAt) - at + 86_400_000,
        },
      );
    }
  }

  /**
   * After a limiter call on a credit balance (the first decision of its batch carries it): the
   * refill it applied, the low thresholds it crossed, the balance found unable to pay (once until
   * credits come back: CreditBatch.exhausted); each is the
   * customer's (or the lone key's), named by the key whose request caused it, or by the customer
   * alone when an admin read or change caused it.
   */
  onCredits(record: KeyRecord | CustomerRef, batch: CreditBatch, refillAmount: number | null): void {
    const crossed = creditCrossings(batch, refillAmount, this.percents);
    for (const { type, data } of crossed ?? []) {
      void this.fanOut.emit(type, 'id' in record ? keyRef(record) : record, data);
    }
  }

  /** When a request started a ban (only that one decision carries `started`). */
  onBanned(record: KeyRecord, banEndsAt: number): void {
    void this.fanOut.emit('key.banned', keyRef(record), { bannedUntil: new Date(banEndsAt).toISOString() });
  }

  /** After an audited change to a key: the event of the same name, with the key as it is now. */
  keyChanged(type: KeyChange, keyId: string, fields: Record<string, unknown>): void {
    const extra = picked(fields, KEY_CHANGE_FIELDS);
    void this.keys
      .get(keyId)
      .then((record) => this.fanOut.emit(type, record ? keyRef(record) : { keyId, plan: '', name: '' }, extra))
      .catch((err) => this.logger.warn({ err, keyId, event: type }, 'webhooks: event not sent'));
  }

  /** After an audited change to a customer: the event of the same name, with the customer as the change left it. */
  customerChanged(type: CustomerChange, customer: EventCustomer, fields: Record<string, unknown>): void {
    void this.fanOut.emit(type, customerRef(customer), picked(fields, CUSTOMER_CHANGE_FIELDS));
  }

  /** The expiry notices due now, each sent once whichever replica's scan finds it first. */
  async scan(): Promise<void> {
    const now = this.now();
    const { from, to } = noticeWindow(now);
    // Only the keys that can be due a notice: a store of a million keys is not read whole.
    for (const record of await this.keys.expiringBetween(from, to)) {
      const notice = expiryNotice(record, now);
      if (!notice) continue;
      await this.fanOut.emit(
        notice.type,
        keyRef(record),
        { expiresAt: record.expiresAt, ...(notice.days ? { days: notice.days } : {}) },
        { marker: notice.marker, ttlMs: notice.markerTtlMs },
      );
    }
  }
}

/** What every key event says of its key: the key as it is now, its customer included. */
function keyRef(record: KeyRecord): KeyRef {
  return {
    keyId: record.id,
    plan: record.plan,
    name: record.name,
    ...(record.customerId !== undefined ? { customerId: record.customerId } : {}),
  };
}

/** What a customer event names of its customer, as keyRef does of a key. */
function customerRef(customer: EventCustomer): CustomerEventRef {
  return {
    customerId: customer.id,
    plan: customer.plan,
    name: customer.name,
    ...(customer.externalId !== undefined ? { externalId: customer.externalId } : {}),
  };
}
