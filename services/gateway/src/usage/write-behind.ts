/** How long values wait to be written together: the usage history's counts and the credit refunds. */
const FLUSH_MS = 1_000;

/**
 * Values taken on the request path and written off it, together: a Map of what waits, keyed by a
 * string, whose first entry starts a one-second timer (unref'd: it keeps no process up), and a
 * flush that swaps the Map for an empty one and hands the full one to `write`. A value taken out by
 * a flush is in no later batch, so it is written (or fails) once. On the request path a value
 * costs a Map get and set (RedisUsageHistory.served gives the measurement).
 *
 * `write` owns its batch: what it rejects with goes to flush()'s caller, or to `onError` when the
 * timer flushed.
 */
export class WriteBehind<V> {
  private pending = new Map<string, V>();
  private timer: NodeJS.Timeout | null = null;
  /** The writes under way, a timer's among them, settled either way: a flush waits for them too. */
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (batch: ReadonlyMap<string, V>) => Promise<unknown>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** What waits under `key`: to add to, then `set`. */
  get(key: string): V | undefined {
    return this.pending.get(key);
  }

  /** Sets what waits under `key`; the batch's first value schedules its write. */
  set(key: string, value: V): void {
    this.pending.set(key, value);
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.flush().catch(this.onError);
      }, FLUSH_MS);
      this.timer.unref();
    }
  }

  /**
   * Writes what waits now (with nothing waiting, no write); settles as the write does, and not
   * before the writes already under way have (the timer's may have taken the batch just before):
   * once it resolves, every value set before the call has been written or has failed.
   */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const earlier = this.writing;
    if (this.pending.size === 0) return earlier;
    const batch = this.pending;
    this.pending = new Map();
    const written = this.write(batch);
    const settled = written.then(
      () => {},
      () => {},
    );
    this.writing = Promise.all([earlier, settled]).then(() => {});
    await earlier;
    await written;
  }
}
