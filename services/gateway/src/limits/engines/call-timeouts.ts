/** A call being timed: `settle()` once its reply is back, and its timeout never fires. */
export interface TimedCall {
  settle(): void;
}

interface Entry extends TimedCall {
  readonly expiresAt: number;
  readonly onTimeout: () => void;
  settled: boolean;
}

/**
 * Times many calls that share one timeout with one timer. A call started later expires later,
 * so the calls are a queue in expiry order: one timer waits for the first unsettled one, and
 * when it fires every call past its time times out and the timer waits for the next. With
 * thousands of calls a second that is about one timer per timeout period, where a timer per
 * call was a setTimeout and a clearTimeout on every decision. Measured with this and one write
 * per tick (bench:many-keys-redis, 20,000 keys at 2,000 req/s, runs alternating with the build
 * before, a busy host): gateway CPU per request 251–290 µs before, 199–217 after.
 */
export class CallTimeouts {
  private readonly queue: Entry[] = [];
  /** The first entry of `queue` still held: those before it have settled or fired. */
  private head = 0;
  private timer: NodeJS.Timeout | undefined;

  /** `clock`: monotonic milliseconds, so a step of the wall clock neither fires nor holds a timeout. */
  constructor(
    private readonly timeoutMs: number,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Starts timing a call: `onTimeout` runs once if it is not settled within the timeout. */
  start(onTimeout: () => void): TimedCall {
    const entry: Entry = {
      expiresAt: this.clock() + this.timeoutMs,
      onTimeout,
      settled: false,
      settle() {
        entry.settled = true;
      },
    };
    this.queue.push(entry);
    if (this.timer === undefined) this.arm(this.timeoutMs);
    return entry;
  }

  /** Calls being timed (settled ones still queued are not counted). */
  get size(): number {
    let n = 0;
    for (const entry of this.queue.slice(this.head)) if (!entry.settled) n++;
    return n;
  }

  private arm(ms: number): void {
    // Unref'd: a call it times holds its socket, which keeps the process up while it is out.
    this.timer = setTimeout(this.fire, Math.max(0, ms)).unref();
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const now = this.clock();
    const expired: Entry[] = [];
    for (let entry = this.queue[this.head]; entry; entry = this.queue[this.head]) {
      if (!entry.settled && entry.expiresAt > now) break;
      this.head++;
      if (!entry.settled) {
        entry.settled = true;
        expired.push(entry);
      }
    }
    // Drop what is behind the head once it is most of the array (amortised, not a copy a fire).
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    const next = this.queue[this.head];
    if (next) this.arm(next.expiresAt - now);
    // After the queue is consistent: a timeout's handler may start calls of its own.
    for (const entry of expired) entry.onTimeout();
  };
}
