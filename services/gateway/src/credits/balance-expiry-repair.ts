import type { Cluster, Redis, Result } from 'ioredis';
import { type RedisClient, whenReady } from '../redis/clients.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    creditBalanceRepair(key: string): Result<[number, number], Context>;
  }
}

/** Set, without an expiry, once every master was scanned: later starts do nothing. DEL it to run again. */
export const BALANCE_REPAIR_MARKER = 'repairs:credit-balance-expiry';

/**
 * One balance hash made whole: no expiry, and no usage-history hour fields (`13a`, `13:30u`: the
 * hour, its minutes past the UTC hour, one of a l b c f u). A balance's own fields (credit-script.ts:
 * b h u r x m p q o oi, `i:<ref>`) never start with a digit, so none of them matches. Returns
 * {1 when an expiry was removed, the fields removed}.
 */
const REPAIR_LUA = `
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return {0, 0} end
local persisted = redis.call('PERSIST', KEYS[1])
local stray = {}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.find(f, '^%d+[albcfu]$') or string.find(f, '^%d+:%d%d[albcfu]$') then stray[#stray + 1] = f end
end
for i = 1, #stray, 500 do
  redis.call('HDEL', KEYS[1], unpack(stray, i, math.min(i + 499, #stray)))
end
return {persisted, #stray}
`;

const SCAN_COUNT = 1_000;
const IN_FLIGHT = 100;

/** What the repair logs to: the gateway's logger. */
export interface RepairLog {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
}

export interface BalanceRepairCounts {
  /** Balance hashes looked at. */
  scanned: number;
  /** Those that had an expiry or hour fields. */
  repaired: number;
  expiries: number;
  fields: number;
}

export type BalanceRepairOutcome =
  | ({ outcome: 'repaired' } & BalanceRepairCounts)
  | { outcome: 'already done' }
  | { outcome: 'failed'; err: unknown };

const globEscape = (s: string): string => s.replace(/[*?[\]\\]/g, '\\$&');
const regexEscape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function stopped(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new Error('the gateway is closing');
}

/** Until `client` takes commands, or the signal stops the wait. */
async function ready(client: RedisClient, signal: AbortSignal | undefined): Promise<void> {
  if (client.status === 'wait') await (client as Redis).connect().catch(() => {});
  if (!signal) return whenReady(client);
  const onAbort = new Promise<never>((_, reject) => {
    signal.addEventListener('abort', () => reject(new Error('the gateway is closing')), { once: true });
  });
  onAbort.catch(() => {});
  await Promise.race([whenReady(client), onAbort]);
}

/**
 * Takes off balance hashes the usage history's hour fields and the expiry that came with them (a
 * limit script that took a lone key's balance hash for a customer's day hash wrote both), since
 * that expiry deletes a balance left idle past the history's retention. Every master's balance
 * hashes (`${prefix}{owner}:credits`) are scanned, each repaired in one script of its own key
 * (a Cluster routes it), then the marker is set. Repairing is idempotent, so replicas starting
 * together both run it harmlessly; one that fails or is stopped sets no marker and the next start
 * runs it again. Logs one line: info with the counts, or warn with the error. Never throws.
 */
export async function repairBalanceExpiry(
  redis: RedisClient,
  prefix: string,
  log: RepairLog,
  signal?: AbortSignal,
): Promise<BalanceRepairOutcome> {
  try {
    await ready(redis, signal);
    const marker = `${prefix}${BALANCE_REPAIR_MARKER}`;
    if ((await redis.exists(marker)) === 1) return { outcome: 'already done' };
    if (typeof (redis as unknown as Record<string, unknown>).creditBalanceRepair !== 'function') {
      (redis as Redis).defineCommand('creditBalanceRepair', { lua: REPAIR_LUA, numberOfKeys: 1 });
    }
    const balanceKey = new RegExp(`^${regexEscape(prefix)}\\{[^}]*\\}:credits$`);
    const counts: BalanceRepairCounts = { scanned: 0, repaired: 0, expiries: 0, fields: 0 };
    const masters = redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
    for (const node of masters) {
      await ready(node, signal);
      let cursor = '0';
      do {
        stopped(signal);
        const [next, keys] = await node.scan(
          cursor,
          'MATCH',
          `${globEscape(prefix)}{*}:credits`,
          'COUNT',
          SCAN_COUNT,
          'TYPE',
          'hash',
        );
        cursor = next;
        const balances = keys.filter((k) => balanceKey.test(k));
        // A hundred scripts at a time, so the request path's commands are not queued behind a page's.
        for (let i = 0; i < balances.length; i += IN_FLIGHT) {
          const batch = balances.slice(i, i + IN_FLIGHT);
          for (const [persisted, fields] of await Promise.all(batch.map((key) => redis.creditBalanceRepair(key)))) {
            counts.scanned += 1;
            if (persisted === 1 || fields > 0) counts.repaired += 1;
            counts.expiries += persisted;
            counts.fields += fields;
          }
        }
      } while (cursor !== '0');
    }
    await redis.set(marker, new Date().toISOString());
    log.info(
      { ...counts },
      `credits: balance expiry repair: ${counts.repaired} of ${counts.scanned} balances repaired ` +
        `(${counts.expiries} expiries removed, ${counts.fields} hour fields removed)`,
    );
    return { outcome: 'repaired', ...counts };
  } catch (err) {
    log.warn({ err }, 'credits: balance expiry repair failed; the next start runs it again');
    return { outcome: 'failed', err };
  }
}

/** The repair run once in the background after the gateway listens, stopped when it closes (app.ts). */
export class BalanceExpiryRepair {
  private readonly abort = new AbortController();
  private running: Promise<BalanceRepairOutcome> | null = null;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly log: RepairLog,
  ) {}

  /** Starts it, once; what it found is logged. */
  start(): void {
    this.running ??= repairBalanceExpiry(this.redis, this.prefix, this.log, this.abort.signal);
  }

  /** Stops a scan still going (no marker: the next start runs it again) and waits for it to end. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }
}
