import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The gateway's own series, beside the request metrics every service has. */
export function createGatewayMetrics(registry: Registry) {
  return {
    decisions: new Counter({
      name: 'gateway_rate_limit_decisions_total',
      help: 'Rate-limit decisions for keyed requests: admitted, limited, banned, unavailable; by where they were taken',
      labelNames: ['decision', 'source'],
      registers: [registry],
    }),
    anonymous: new Counter({
      name: 'gateway_anonymous_requests_total',
      help: 'Requests counted against the per-IP limit (no valid key, or the API reference), by reason and by whether that limit let them through',
      labelNames: ['reason', 'decision'],
      registers: [registry],
    }),
    upstreamErrors: new Counter({
      name: 'gateway_upstream_errors_total',
      help: 'Proxied requests that got no usable answer from upstream, by kind',
      labelNames: ['kind'],
      registers: [registry],
    }),
    bans: new Counter({
      name: 'gateway_bans_total',
      help: 'API keys banned for ignoring rate limits, counted when the ban starts, by where the decision was taken',
      labelNames: ['source'],
      registers: [registry],
    }),
    redisErrors: new Counter({
      name: 'gateway_redis_errors_total',
      help: 'Rate-limit calls to Redis that failed (each one answered by the fallback or refused, per failure mode)',
      registers: [registry],
    }),
    limiterLateReplies: new Counter({
      name: 'gateway_rate_limit_late_replies_total',
      help: 'Rate-limit calls that ran in Redis but were answered after the command timeout: their decisions taken back, their credits refunded',
      registers: [registry],
    }),
    eventBusSubscribed: new Gauge({
      name: 'gateway_event_bus_subscribed',
      help: "1 while key events from other replicas reach this one (its subscription's own probe comes back), else 0",
      registers: [registry],
    }),
    regionSyncLag: new Gauge({
      name: 'gateway_region_sync_lag_seconds',
      help: 'Seconds since the last counts of each other region arrived (regions over NATS; docs/regions.md)',
      labelNames: ['region'],
      registers: [registry],
    }),
    regionPartitioned: new Gauge({
      name: 'gateway_region_partitioned',
      help: '1 while this region enforces shares (NATS away, or a region not heard from for REGION_STALE_MS), else 0',
      registers: [registry],
    }),
    regionSharesInForce: new Gauge({
      name: 'gateway_region_shares_in_force',
      help: 'Windows (per key or customer) that a regional share has bounded since the partition began',
      registers: [registry],
    }),
    adminActions: new Counter({
      name: 'gateway_admin_actions_total',
      help: 'Changes made through the admin API: create, update, rotate, revoke, unban',
      labelNames: ['action'],
      registers: [registry],
    }),
    keyStore: new Histogram({
      name: 'gateway_key_store_duration_seconds',
      help: 'Key store call latency, by operation and outcome',
      labelNames: ['operation', 'outcome'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
