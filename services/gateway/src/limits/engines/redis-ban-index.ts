import type { RedisClient } from '../../redis/clients.js';
import type { BanList } from '../key-limiter.js';

/** How many bans wait at most for Redis to take them: bans are rare, a flood of them is not kept. */
const MAX_WAITING = 10_000;

interface WaitingBan {
  endsAt: number;
  /** The ban's own key (in the key's or customer's slot): still there when it is entered? */
  banKey: string;
}

/**
 * The index of bans in force: a sorted set of key ids by the ban's end (ms), one Redis key for
 * the whole limiter. It is written beside the limit script, not in it: on a Cluster the script's
 * keys share the key's (or customer's) slot and this one has its own. A ban starts rarely, so one
 * more round trip then costs nothing the request path feels.
 *
 * Should Redis fail between the script and the index write, the ban is in force all the same (the
 * script wrote it) and a request is not refused a decision for the sake of an admin view; the ban
 * waits here and is entered by the next limiter call that succeeds, unless it has ended or been
 * lifted by then (its ban key is read first: a ban lifted on another replica is not entered).
 */
export class RedisBanIndex {
  private readonly waiting = new Map<string, WaitingBan>();
  private entering = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly key: string,
    private readonly now: () => number,
  ) {}

  /**
   * Enters a ban that has just started (awaited: the admin view shows it once the answer is out).
   * The script has just written it, so it goes in as it is; only a write that fails waits.
   */
  async started(keyId: string, banKey: string, endsAt: number): Promise<void> {
    try {
      await Promise.all([
        this.redis.zadd(this.key, endsAt, keyId),
        this.redis.zremrangebyscore(this.key, '-inf', this.now()),
      ]);
      // An earlier ban of the key that waited is over: this one's end stands.
      this.waiting.delete(keyId);
    } catch {
      if (this.waiting.size >= MAX_WAITING) this.waiting.delete(this.waiting.keys().next().value as string);
      this.waiting.set(keyId, { endsAt, banKey });
    }
  }

  /** A limiter call succeeded: Redis answers again, so the bans that wait go in (one at a time). */
  retry(): void {
    if (this.waiting.size > 0 && !this.entering) void this.enterWaiting();
  }

  async lifted(keyId: string): Promise<void> {
    this.waiting.delete(keyId);
    await this.redis.zrem(this.key, keyId);
  }

  async list(limit: number): Promise<BanList> {
    const now = this.now();
    await this.redis.zremrangebyscore(this.key, '-inf', now);
    const [count, range] = await Promise.all([
      this.redis.zcount(this.key, `(${now}`, '+inf'),
      this.redis.zrangebyscore(this.key, `(${now}`, '+inf', 'WITHSCORES', 'LIMIT', 0, limit),
    ]);
    const items: BanList['items'] = [];
    for (let i = 0; i < range.length; i += 2) items.push({ keyId: range[i] as string, endsAt: Number(range[i + 1]) });
    return { count, items };
  }

  /** The bans that wait, those still in force (read first: ended or lifted meanwhile, they stay out). */
  private async enterWaiting(): Promise<void> {
    this.entering = true;
    try {
      const now = this.now();
      const due = [...this.waiting];
      // Only what is still in force: ended bans are dropped, lifted ones have no ban key left.
      const live = await Promise.all(
        due.map(async ([, ban]) => ban.endsAt > now && (await this.redis.pttl(ban.banKey)) > 0),
      );
      const entries = due.filter((_, i) => live[i]).flatMap(([keyId, { endsAt }]) => [endsAt, keyId]);
      if (entries.length > 0) await this.redis.zadd(this.key, ...entries);
      await this.redis.zremrangebyscore(this.key, '-inf', now);
      for (const [keyId, ban] of due) if (this.waiting.get(keyId) === ban) this.waiting.delete(keyId);
    } catch {
      // Kept: the next limiter call that succeeds enters them.
    } finally {
      this.entering = false;
    }
  }
}
