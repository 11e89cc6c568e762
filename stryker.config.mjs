// @ts-check
// `npm run mutate` (scripts/mutate.mjs): mutation testing of the rate limits and their policy, the
// API keys, their sync between replicas, the event bus, the gate, the usage history, webhooks and
// the webhook address guard, customers, credits, metering, billing, the portal and GET /v1/usage,
// one area at a time, each against the test files that exercise it. Not part of `npm test`;
// incremental mode reruns only what changed since the last. See docs/mutation-testing.md.

const SRC = 'services/gateway/src';
const TEST = 'services/gateway/test';

/**
 * Each area: the code it mutates and the in-process tests run against its mutants (the module
 * itself, or app.inject on a real Redis), the most focused first: stryker.vitest.config.ts runs
 * them in this order, and a mutant's run stops at its first failing test. A test file belongs to
 * an area when it exercises that code directly; suites that spawn processes and the topology
 * suites are left out everywhere, and so are files that reach the code only on the way to
 * something else (every gateway test creates keys, but api-key.ts is tested in api-key.test.ts).
 * @type {Record<import('./stryker.config.d.mts').AreaName, import('./stryker.config.d.mts').MutationArea>}
 */
export const areas = {
  // The limiters (memory and Redis), their headers and failure mode. Not the policy they enforce
  // (`policy`) nor the usage history (`history`): each has an area of its own.
  limits: {
    mutate: [
      `${SRC}/limits/**/*.ts`,
      `!${SRC}/limits/policy.ts`,
      `!${SRC}/limits/portal-address-limits.ts`,
      // The rate-limit headers and the per-address charge moved to gate/ but are the limits' edge.
      `${SRC}/gate/rate-limit-headers.ts`,
      `${SRC}/gate/keyless.ts`,
    ],
    testFiles: [
      `${TEST}/limits/policy.test.ts`,
      `${TEST}/gate/rate-limit-headers.test.ts`,
      `${TEST}/limits/anonymous-limiter.test.ts`,
      `${TEST}/limits/engines/memory-key-limiter.test.ts`,
      `${TEST}/plans/plans-file.test.ts`,
      `${TEST}/limits/guarded-limiter.test.ts`,
      `${TEST}/limits/engines/limit-script-parts.test.ts`,
      `${TEST}/limits/engines/redis-key-limiter.test.ts`,
      `${TEST}/limits/auth-failures.test.ts`,
    ],
  },
  // Key format, records and stores, keys files, expiry.
  keys: {
    mutate: [
      `${SRC}/keys/**/*.ts`,
      `!${SRC}/keys/key-resolver.ts`,
      // Its only tests need a MongoDB (MONGO_URL, a container runtime or mongod) and skip without one.
      ...(process.env.MONGO_URL ? [] : [`!${SRC}/keys/mongo-key-store.ts`]),
    ],
    testFiles: [
      `${TEST}/keys/api-key.test.ts`,
      `${TEST}/keys/cidrs.test.ts`,
      `${TEST}/keys/memory-key-store.test.ts`,
      `${TEST}/keys/mongo-key-store.test.ts`,
      `${TEST}/keys/keys-file.test.ts`,
      `${TEST}/keys/file-key-store.test.ts`,
      `${TEST}/keys/key-lifecycle.test.ts`,
      // A new key and its refusals (key-requests.ts) through the admin API.
      `${TEST}/admin/routes/keys.test.ts`,
      // Scopes and allowed addresses through the admin API.
      `${TEST}/plans/policies.test.ts`,
    ],
  },
  // The key cache in front of the store.
  cache: {
    mutate: [`${SRC}/keys/key-resolver.ts`],
    testFiles: [`${TEST}/keys/key-resolver.test.ts`, `${TEST}/keys/key-lifecycle.test.ts`],
  },
  gate: {
    mutate: [`${SRC}/gate/**/*.ts`, `!${SRC}/gate/rate-limit-headers.ts`, `!${SRC}/gate/keyless.ts`],
    testFiles: [
      `${TEST}/gate/gate.test.ts`,
      // Scopes, IP allowlists, shadow plans and route costs: the gate's 403s and what it charges.
      `${TEST}/plans/policies.test.ts`,
      `${TEST}/gate/gate-hardening.test.ts`,
      `${TEST}/keys/key-lifecycle.test.ts`,
      'tests/hostile/operations.test.ts',
    ],
  },
  // Key sync between replicas and the event bus under it.
  sync: {
    mutate: [`${SRC}/replicas/key-sync.ts`, `${SRC}/replicas/event-bus.ts`],
    testFiles: [`${TEST}/replicas/event-bus.test.ts`, `${TEST}/replicas/key-sync.test.ts`],
  },
  // The limit policy: a plan's windows (fixed, sliding, calendar day and month), shadow mode, the
  // plans and route costs of PLANS_FILE, a key's limits and scopes from its plan.
  policy: {
    mutate: [`${SRC}/limits/policy.ts`, `${SRC}/plans/plans.ts`, `${SRC}/plans/plans-file.ts`],
    testFiles: [
      `${TEST}/limits/policy.test.ts`,
      `${TEST}/plans/plans-file.test.ts`,
      `${TEST}/gate/rate-limit-headers.test.ts`,
      `${TEST}/limits/engines/memory-key-limiter.test.ts`,
      // Costs and shadow mode as a client meets them: what a request takes, what is let through.
      `${TEST}/plans/policies.test.ts`,
    ],
  },
  // The usage history (memory and Redis) and what is read from it: a key's series and its CSV,
  // the top keys. It decides nothing; billing is computed from it.
  history: {
    mutate: [
      `${SRC}/usage/usage-history.ts`,
      `${SRC}/usage/redis-usage-history.ts`,
      `${SRC}/usage/write-behind.ts`,
      `${SRC}/usage/reports.ts`,
      `${SRC}/admin/routes/usage.ts`,
      `${SRC}/admin/routes/key-usage.ts`,
      // A subject's history (a customer's or a key's) and its one route.
      `${SRC}/customers/subject-history.ts`,
      `${SRC}/admin/routes/usage-history.ts`,
    ],
    testFiles: [
      // What is built from the hours (unit), the stores' contract (memory and Redis), then the
      // admin routes on two replicas.
      `${TEST}/usage/reports.test.ts`,
      `${TEST}/usage/write-behind.test.ts`,
      `${TEST}/usage/usage-history-stores.test.ts`,
      `${TEST}/usage/usage-history.test.ts`,
      `${TEST}/admin/routes/customer-usage-history.test.ts`,
      `${TEST}/limits/guarded-limiter.test.ts`,
    ],
  },
  // Webhooks: intake (the admin routes), fan-out of events to endpoints, signing, delivery through
  // either queue, retries and the failing mark. The address guard is an area of its own.
  webhooks: {
    mutate: [
      `${SRC}/webhooks/**/*.ts`,
      `!${SRC}/webhooks/delivery/address-guard.ts`,
      `${SRC}/admin/routes/webhooks.ts`,
      `${SRC}/admin/routes/webhook-deliveries.ts`,
    ],
    testFiles: [
      `${TEST}/webhooks/config.test.ts`,
      `${TEST}/webhooks/intake.test.ts`,
      // Fan-out, key events and scheduling on the memory store and queue.
      `${TEST}/webhooks/fan-out.test.ts`,
      // One attempt as a receiver meets it: the POST, the signatures, what is reported.
      `${TEST}/webhooks/send.test.ts`,
      // One attempt of a queued delivery: what it records, counts, logs and marks.
      `${TEST}/webhooks/deliver.test.ts`,
      `${TEST}/webhooks/retries.test.ts`,
      // The sender (send.ts) posting to a receiver, and refusing at connect time.
      `${TEST}/webhooks/address-guard.test.ts`,
      `${TEST}/webhooks/webhook-stores.test.ts`,
      // The admin routes' schemas and a create undone (memory gateways, one own Redis), before
      // the end-to-end file.
      `${TEST}/admin/routes/webhooks.test.ts`,
      // A gateway closing: the queue's Redis connections and the sender's sockets ended.
      `${TEST}/webhooks/lifecycle.test.ts`,
      `${TEST}/webhooks/webhooks.test.ts`,
      // Last: its ping waits out the 5 s bound on a paused Redis.
      `${TEST}/admin/routes/webhook-deliveries.test.ts`,
    ],
  },
  // The SSRF rules for webhook endpoints: when a URL is accepted and each address dialled.
  guard: {
    mutate: [`${SRC}/webhooks/delivery/address-guard.ts`],
    testFiles: [`${TEST}/webhooks/address-guard.test.ts`, `${TEST}/webhooks/webhooks.test.ts`],
  },
  // Customers: their records and stores, billing periods in their zones, the rules for their keys,
  // the admin routes.
  customers: {
    mutate: [
      `${SRC}/customers/**/*.ts`,
      // Its only tests need a MongoDB, as in `keys`.
      ...(process.env.MONGO_URL ? [] : [`!${SRC}/customers/mongo-customer-store.ts`]),
      `!${SRC}/customers/*portal-session-store.ts`,
      // A subject's history is the `history` area's.
      `!${SRC}/customers/subject-history.ts`,
      `${SRC}/admin/routes/customers.ts`,
    ],
    testFiles: [
      `${TEST}/customers/customer-operations.test.ts`,
      `${TEST}/customers/customer-locks.test.ts`,
      `${TEST}/customers/memory-customer-store.test.ts`,
      `${TEST}/customers/redis-customer-store.test.ts`,
      `${TEST}/customers/mongo-customer-store.test.ts`,
      `${TEST}/customers/customer-resolver-cache.test.ts`,
      `${TEST}/customers/customer-resolver.test.ts`,
      `${TEST}/customers/customer-steps.test.ts`,
      `${TEST}/customers/file-customers.test.ts`,
      `${TEST}/keys/keys-file-customers.test.ts`,
      `${TEST}/admin/routes/customers.test.ts`,
      `${TEST}/admin/routes/file-customers.test.ts`,
    ],
  },
  // Credits: terms and refills, both ledgers, refunds, what a period spent, the admin routes. The
  // Lua of credit-script.ts is a module constant: Stryker mutates no Lua (docs/mutation-testing.md).
  credits: {
    mutate: [`${SRC}/credits/**/*.ts`, `${SRC}/billing/credit-owner.ts`, `${SRC}/admin/routes/credits.ts`],
    testFiles: [
      `${TEST}/credits/credit-terms.test.ts`,
      `${TEST}/credits/memory-credit-ledger.test.ts`,
      `${TEST}/credits/redis-credit-ledger.test.ts`,
      `${TEST}/credits/credits-spent.test.ts`,
      // The routes' own before the suites that only pass through them (a top-up, a balance read).
      `${TEST}/admin/routes/customer-credits.test.ts`,
      `${TEST}/admin/routes/key-credits.test.ts`,
      `${TEST}/credits/credit-refunds.test.ts`,
      `${TEST}/credits/credit-defaults.test.ts`,
    ],
  },
  // The metering export: the closer of each hour, its revisions, both stores, CloudEvents and Stripe.
  metering: {
    mutate: [`${SRC}/metering/**/*.ts`, `${SRC}/admin/routes/metering-events.ts`],
    testFiles: [
      `${TEST}/metering/split-by-route.test.ts`,
      `${TEST}/metering/closer.test.ts`,
      `${TEST}/metering/metering-stores.test.ts`,
      `${TEST}/metering/metering-events.test.ts`,
    ],
  },
  // An invoice from a price, its CSV, the price of a plan, the admin preview.
  billing: {
    mutate: [
      `${SRC}/billing/**/*.ts`,
      `!${SRC}/billing/credit-owner.ts`,
      `${SRC}/plans/plan-price.ts`,
      `${SRC}/admin/routes/invoice-preview.ts`,
    ],
    testFiles: [
      `${TEST}/billing/invoice.test.ts`,
      `${TEST}/billing/invoice-csv.test.ts`,
      `${TEST}/plans/plan-price.test.ts`,
      `${TEST}/admin/routes/invoice-preview.test.ts`,
    ],
  },
  // The customer portal: sign-in and sessions (memory and Redis), CSRF, its key, usage, credit and
  // invoice routes, its own address limits.
  portal: {
    mutate: [
      `${SRC}/portal/**/*.ts`,
      `${SRC}/customers/*portal-session-store.ts`,
      `${SRC}/limits/portal-address-limits.ts`,
      `${SRC}/admin/routes/portal-sessions.ts`,
    ],
    testFiles: [
      `${TEST}/customers/portal-session-stores.test.ts`,
      `${TEST}/portal/sessions.test.ts`,
      `${TEST}/portal/session-edges.test.ts`,
      `${TEST}/portal/key-routes.test.ts`,
      `${TEST}/portal/key-rules.test.ts`,
      `${TEST}/portal/max-keys.test.ts`,
      `${TEST}/portal/usage-routes.test.ts`,
      `${TEST}/portal/account-reads.test.ts`,
      `${TEST}/portal/credit-routes.test.ts`,
      `${TEST}/portal/invoice-routes.test.ts`,
      `${TEST}/portal/protection.test.ts`,
      `${TEST}/portal/address-limit-edges.test.ts`,
      // The leaked-key notice, a customer's keys from API_KEYS_FILE, HSTS and the pages' files.
      `${TEST}/portal/leak-routes.test.ts`,
      `${TEST}/portal/file-keys.test.ts`,
      `${TEST}/portal/hsts.test.ts`,
      `${TEST}/portal/pages.test.ts`,
      `${TEST}/portal/portal-headers.test.ts`,
      // What the route schemas refuse, each row a route's.
      `${TEST}/portal/hostile-requests.test.ts`,
    ],
  },
  // GET /v1/usage: what a key's holder reads of its own usage, and the read limit per key.
  'self-service': {
    mutate: [`${SRC}/self-service/**/*.ts`],
    testFiles: [`${TEST}/self-service/usage-route.test.ts`],
  },
};

/** The area scripts/mutate.mjs asks for; `stryker run` alone runs every area at once (slow). */
const name = process.env.MUTATE_AREA;
const all = Object.values(areas);
const area =
  name === undefined
    ? { mutate: all.flatMap((a) => a.mutate), testFiles: [...new Set(all.flatMap((a) => a.testFiles))] }
    : Object.hasOwn(areas, name)
      ? areas[/** @type {keyof typeof areas} */ (name)]
      : undefined;
if (!area) throw new Error(`MUTATE_AREA=${name} is not one of ${Object.keys(areas).join(', ')}`);
const out = `reports/mutation/${name ?? 'all'}`;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: area.mutate,
  testFiles: area.testFiles,
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.vitest.config.ts', pool: 'forks' },
  coverageAnalysis: 'perTest',
  // A mutant's run may take 3 times its tests' time in the initial run plus 10 s, then counts as
  // a timeout (detected). The defaults (1.5 times plus 5 s) let a loaded machine time out
  // equivalent mutants whose tests merely ran slow; a test that hangs fails at vitest's 10 s
  // testTimeout instead, so this only ends loops that never yield.
  timeoutFactor: 3,
  timeoutMS: 10_000,
  // Mutants in module-level constants run every test each: a fifth of the mutants, half the
  // time. They are listed as ignored in the report, not scored.
  ignoreStatic: true,
  concurrency: 2,
  incremental: true,
  incrementalFile: `${out}/stryker-incremental.json`,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: `${out}/index.html` },
  jsonReporter: { fileName: `${out}/mutation.json` },
  // The services' built output and the deployment files play no part in these tests.
  ignorePatterns: ['/services/*/dist', '/bench', '/deploy', '/docs'],
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
