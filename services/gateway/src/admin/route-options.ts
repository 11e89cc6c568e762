import type { GatewayDeps } from '../deps.js';
import type { Idempotency } from './idempotency.js';

/**
 * What the admin routes are given: the collaborators each one uses (built once in deps.ts), as
 * the gate takes them, and the creates' Idempotency-Key runner.
 */
export interface AdminRouteOptions<K extends keyof GatewayDeps = keyof GatewayDeps> {
  deps: Pick<GatewayDeps, K>;
  /** Runs the creates under their Idempotency-Key. */
  idempotency: Idempotency;
}
