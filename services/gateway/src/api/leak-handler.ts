import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { sameSecret } from '../keys/api-key.js';
import { rotateKey } from '../keys/key-operations.js';
import type { KeyRecord } from '../keys/key-store.js';
import type { LeakResponse, LeaksConfig } from '../leaks/config.js';
import type { LeakRecord } from '../leaks/leak-store.js';
import { announceKeyChange } from '../replicas/key-sync.js';
import { audit } from './audit.js';

/** A report to act on: the leaked secret's hash, and where it was found. */
export interface LeakReport {
  sha256: string;
  reporter: LeakRecord['reporter'];
  type?: string;
  source: string;
  url?: string;
}

/**
 * What a report proved: `true_positive` with what was done when it names a secret that works
 * now, else `false_positive` (no such key, a revoked or expired one, a secret past its grace).
 */
export type LeakOutcome = { label: 'true_positive'; leak: LeakRecord } | { label: 'false_positive' };

export type LeakDeps = Pick<
  GatewayDeps,
  'keyStore' | 'keyResolver' | 'events' | 'leaks' | 'metrics' | 'webhooks' | 'now'
>;

/** Which secret of a live key a hash is, at `at`; undefined when it works no longer, or never did. */
function workingSecret(record: KeyRecord | null, sha256: string, at: number): 'current' | 'previous' | undefined {
  if (!record || record.revokedAt) return undefined;
  if (record.expiresAt && Date.parse(record.expiresAt) <= at) return undefined;
  // Both compared in constant time whatever the first answer, so timing tells nothing of which.
  const current = sameSecret(record.sha256, sha256);
  const previous = record.previous ? sameSecret(record.previous.sha256, sha256) : false;
  if (current) return 'current';
  if (previous && record.previous && Date.parse(record.previous.expiresAt) > at) return 'previous';
  return undefined;
}

/**
 * Acts on proven leaks, whoever reported them (the receiver, an operator): finds the key, and
 * notifies, rotates or revokes it as its customer, its plan or the default says.
 */
export class LeakHandler {
  constructor(
    private readonly deps: LeakDeps,
    private readonly config: Pick<LeaksConfig, 'graceSeconds' | 'response' | 'byPlan' | 'byCustomer'>,
  ) {}

  /** The response for this key: its customer's, else its plan's, else the default. */
  responseFor(record: KeyRecord): LeakResponse {
    const { byCustomer, byPlan, response } = this.config;
    return (record.customerId && byCustomer.get(record.customerId)) || byPlan.get(record.plan) || response;
  }

  /** The key record a secret's hash names: the store's, else API_KEYS_FILE's. */
  private async find(sha256: string): Promise<{ record: KeyRecord; fromFile: boolean } | null> {
    const stored = await this.deps.keyStore.findByHash(sha256);
    if (stored) return { record: stored, fromFile: false };
    let match: KeyRecord | null = null;
    for (const record of this.deps.keyResolver.fileRecords()) {
      if (sameSecret(record.sha256, sha256) || (record.previous && sameSecret(record.previous.sha256, sha256))) {
        match = record;
      }
    }
    return match && { record: match, fromFile: true };
  }

  async report(report: LeakReport, log: FastifyBaseLogger): Promise<LeakOutcome> {
    const at = this.deps.now();
    const found = await this.find(report.sha256);
    const secret = workingSecret(found?.record ?? null, report.sha256, at);
    if (!found || !secret) return { label: 'false_positive' };
    const { record, fromFile } = found;
    let response = this.responseFor(record);
    // A key of API_KEYS_FILE changes in its file, and a secret already rotated out keeps the
    // grace it has: for both the report notifies, and the operator acts.
    if (response === 'rotate' && (fromFile || secret === 'previous')) response = 'notify';
    if (response === 'revoke' && fromFile) response = 'notify';
    const leak: LeakRecord = {
      id: `leak_${randomUUID()}`,
      keyId: record.id,
      ...(record.customerId ? { customerId: record.customerId } : {}),
      reporter: report.reporter,
      ...(report.type !== undefined ? { type: report.type } : {}),
      source: report.source,
      ...(report.url !== undefined ? { url: report.url } : {}),
      reportedAt: new Date(at).toISOString(),
      response,
      secret,
    };
    if (response === 'rotate') {
      const rotated = await rotateKey(this.deps.keyStore, record, at, this.config.graceSeconds);
      if (rotated) {
        leak.leakedSecretEndsAt = rotated.previousKeyExpiresAt;
        if (rotated.record.prefix) leak.successorPrefix = rotated.record.prefix;
        await this.deps.leaks.keepSuccessor(leak.id, rotated.key, Date.parse(rotated.previousKeyExpiresAt));
        await announceKeyChange(this.deps, 'key-changed', record.id, log);
        audit(
          this.deps,
          log,
          'key.rotated',
          { keyId: record.id },
          { previousKeyExpiresAt: rotated.previousKeyExpiresAt },
        );
      } else {
        // Rotated or revoked meanwhile by someone else: what they did stands.
        leak.response = 'notify';
      }
    } else if (response === 'revoke') {
      if (await this.deps.keyStore.revoke(record.id, new Date(at))) {
        await announceKeyChange(this.deps, 'key-revoked', record.id, log);
        audit(this.deps, log, 'key.revoked', { keyId: record.id });
      }
    }
    await this.deps.leaks.add(leak);
    audit(
      this.deps,
      log,
      'key.leaked',
      { keyId: record.id },
      {
        leakId: leak.id,
        reporter: leak.reporter,
        source: leak.source,
        ...(leak.url !== undefined ? { url: leak.url } : {}),
        response: leak.response,
        ...(report.type !== undefined ? { type: report.type } : {}),
        ...(leak.leakedSecretEndsAt ? { leakedSecretEndsAt: leak.leakedSecretEndsAt } : {}),
      },
    );
    return { label: 'true_positive', leak };
  }
}
