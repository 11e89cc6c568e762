import type { FastifyBaseLogger } from 'fastify';
import { DeliverPolicy, type JetStreamClient, type NatsConnection, nanos, StorageType } from 'nats';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { CountsMessage, RegionCounts, RegionsStatus } from './region-counts.js';

/** The stream every region publishes its counts to, and the subjects it holds (one per region and source). */
const REGIONS_STREAM = 'GATEWAY_REGIONS';
const REGIONS_SUBJECT = 'gateway.regions';

/** Opens a connection to the regions' NATS (external-clients.ts); it rejects while NATS cannot be reached. */
export type NatsDialer = () => Promise<NatsConnection>;

/**
 * Each source's last message is all it knows (every message carries all its live counts), so the
 * stream keeps one per subject, and none older than the longest rolling window needs.
 */
const STREAM_MAX_AGE_MS = 2 * 60 * 60_000;

/**
 * The exchange of counts between regions over NATS JetStream: every REGION_SYNC_MS this process
 * publishes its live counts to its own subject of the stream, and an ordered consumer of the
 * stream feeds the other regions' into `counts`. Nothing on the request path waits for it: while
 * NATS is away publishing pauses, the other regions go unheard, and the limiter enforces shares.
 */
export class RegionSync {
  private nc: NatsConnection | null = null;
  private js: JetStreamClient | null = null;
  private timer: NodeJS.Timeout | undefined;
  private closing = false;
  private publishing: Promise<void> | null = null;
  /** The stream consumer's messages, stopped before the connection closes (see close). */
  private messages: { stop(): void } | null = null;

  constructor(
    readonly counts: RegionCounts,
    private readonly dial: NatsDialer,
    private readonly options: { syncMs: number; logger: FastifyBaseLogger; metrics: GatewayMetrics },
  ) {}

  get subject(): string {
    return `${REGIONS_SUBJECT}.${this.counts.region}.${this.counts.source}`;
  }

  /** Where this region's gateways publish (a region's name has no dot). */
  private get ownRegionSubjects(): string {
    return `${REGIONS_SUBJECT}.${this.counts.region}.`;
  }

  /** Connects (retrying every interval until NATS answers), then publishes every interval. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.options.syncMs);
    this.timer.unref();
    void this.connect();
  }

  status(): RegionsStatus {
    const status = this.counts.status();
    const { metrics } = this.options;
    metrics.regionSharesInForce.set(status.sharesInForce);
    metrics.regionPartitioned.set(status.partitioned ? 1 : 0);
    for (const view of status.regions) metrics.regionSyncLag.set({ region: view.region }, view.lastSyncAgeMs / 1000);
    return status;
  }

  /** Publishes this process's counts now (the interval does it on its own; tests call it to step). */
  publish(): Promise<void> {
    this.publishing ??= this.send().finally(() => {
      this.publishing = null;
    });
    return this.publishing;
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.timer);
    await this.publishing?.catch(() => {});
    // A consumer still pulling when its connection closes has nats.js print "aborting
    // resetPending - connection is closed" to stderr, outside the logs: it is stopped first.
    this.messages?.stop();
    const nc = this.nc;
    this.nc = null;
    this.counts.connected = false;
    await nc?.close().catch(() => {});
  }

  private async tick(): Promise<void> {
    this.status();
    if (!this.counts.connected) return;
    await this.publish().catch((err: unknown) => this.options.logger.debug({ err }, 'regions: a publish failed'));
  }

  private async send(): Promise<void> {
    const js = this.js;
    if (!js || !this.counts.connected) return;
    await js.publish(this.subject, JSON.stringify(this.counts.snapshot()), { timeout: this.apiTimeoutMs });
  }

  /** JetStream's answers (a publish's ack, a consumer made): at most four intervals, at least 1 s. */
  private get apiTimeoutMs(): number {
    return Math.max(1_000, 4 * this.options.syncMs);
  }

  private async connect(): Promise<void> {
    while (!this.closing) {
      try {
        const nc = await this.dial();
        if (this.closing) {
          await nc.close();
          return;
        }
        this.nc = nc;
        await this.ensureStream(nc);
        this.js = nc.jetstream({ timeout: this.apiTimeoutMs });
        this.counts.connected = true;
        this.options.logger.info({ subject: this.subject }, 'regions: connected to NATS');
        void this.watch(nc);
        void this.listen(nc);
        await this.consume(nc);
        return;
      } catch (err) {
        this.options.logger.warn({ err }, 'regions: NATS cannot be reached; enforcing shares until it can');
        this.counts.connected = false;
        const nc = this.nc;
        this.nc = null;
        await nc?.close().catch(() => {});
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.options.syncMs, 1_000)).unref());
      }
    }
  }

  /** Keeps `connected` with the connection's state; a connection that closes for good is redialled. */
  private async watch(nc: NatsConnection): Promise<void> {
    void nc.closed().then(() => {
      if (this.closing || this.nc !== nc) return;
      this.counts.connected = false;
      this.nc = null;
      void this.connect();
    });
    for await (const event of nc.status()) {
      if (event.type === 'disconnect') this.counts.connected = false;
      else if (event.type === 'reconnect') this.counts.connected = true;
    }
  }

  private async ensureStream(nc: NatsConnection): Promise<void> {
    const jsm = await nc.jetstreamManager();
    const config = {
      name: REGIONS_STREAM,
      subjects: [`${REGIONS_SUBJECT}.>`],
      max_msgs_per_subject: 1,
      max_age: nanos(STREAM_MAX_AGE_MS),
      storage: StorageType.File,
    };
    try {
      await jsm.streams.info(REGIONS_STREAM);
    } catch {
      await jsm.streams.add(config);
    }
  }

  /**
   * The live feed: every message as it is published, over core NATS, which needs no JetStream (no
   * stream leader, no meta quorum). After a 9 s cut healed at 150 ms between regions, the ordered
   * consumer below delivered again 7 s after the link was back, this subscription as soon as the
   * link was (npm run bench:regions). A message both feeds bring is counted once: a count only
   * grows within its window, and the highest wins.
   */
  private async listen(nc: NatsConnection): Promise<void> {
    for await (const m of nc.subscribe(`${REGIONS_SUBJECT}.>`)) this.take(m);
  }

  /**
   * A message of another region into the counts. The region's own (its gateways' counts are in
   * its Redis) is known by its subject and never parsed: each gateway's own message holds all its
   * live counts, about 70 bytes each, and both feeds bring it every interval.
   */
  private take(m: { subject: string; json<T>(): T }): void {
    if (m.subject.startsWith(this.ownRegionSubjects)) return;
    let message: CountsMessage;
    try {
      message = m.json<CountsMessage>();
    } catch {
      return;
    }
    if (typeof message?.region !== 'string' || !Array.isArray(message.entries)) return;
    this.counts.receive(message);
  }

  /**
   * The stream's feed: each source's last message when it starts (what was published before this
   * process subscribed), then every one stored. An ordered consumer restarts itself after a gap;
   * when its iteration ends (NATS restarted) a new one starts.
   */
  private async consume(nc: NatsConnection): Promise<void> {
    while (!this.closing && this.nc === nc) {
      try {
        const consumer = await nc.jetstream({ timeout: this.apiTimeoutMs }).consumers.get(REGIONS_STREAM, {
          // One subject, not a list: nats-server 2.9 (Debian's) knows no filter_subjects.
          filterSubjects: `${REGIONS_SUBJECT}.>`,
          deliver_policy: DeliverPolicy.LastPerSubject,
        });
        // The pull's expiry paces how fast the consumer finds its way back after a link to the
        // stream's region was cut: its heartbeat is half of it and its retries wait about it. At
        // nats.js's 30 s default it was deaf for 32 s after a heal (npm run bench:regions).
        const messages = await consumer.consume({ expires: Math.max(1_000, 2 * this.options.syncMs) });
        this.messages = messages;
        for await (const m of messages) this.take(m);
      } catch (err) {
        if (this.closing) return;
        this.options.logger.debug({ err }, 'regions: the consumer stopped; starting another');
      }
      if (!this.closing)
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.options.syncMs, 1_000)).unref());
    }
  }
}
