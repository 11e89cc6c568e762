import { once } from 'node:events';
import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisClients, type RedisClient, redisOptions, whenReady } from '../../src/redis/clients.js';
import { type GatewayEvent, LocalEventBus, RedisEventBus } from '../../src/replicas/event-bus.js';

/**
 * The key-event bus between replicas (events.ts) on a real Redis, as deps.ts builds it: what it
 * delivers to the key cache and the limiter, and what it tells operators through its hooks (the
 * `gateway_event_bus_subscribed` gauge and the log lines). Its probe timer runs on a fake clock:
 * each probe goes out when a test advances it, so a test says exactly which probes happened.
 * Nothing waits for a message that may not come: Redis answers each connection in order, so once
 * a PING sent after a PUBLISH is answered on a connection, what that PUBLISH sent it has arrived.
 * The suite owns its redis-server: it reads Redis's own command counts and changes its ACLs.
 */
const PROBE_MS = 1_000;

let redis: RedisProcess;
const cleanups: Array<() => unknown> = [];

beforeAll(async () => {
  redis = await RedisProcess.start();
});
afterEach(async () => {
  vi.useRealTimers();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  await redis?.stop();
});

/**
 * A connection of the test's own, made as the gateway makes its request-path ones. Not through helpers.ts:
 * this file imports only the bus and the Redis clients, so a run of it starts in a fraction of a second.
 */
async function rawClient(url = redis.url): Promise<RedisClient> {
  const client = new Redis(url, redisOptions(250));
  client.on('error', () => {});
  cleanups.push(() => client.disconnect());
  await whenReady(client);
  return client;
}

/** Lets promise callbacks queued by replies already read run (no time passes). */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Replica {
  bus: RedisEventBus;
  channel: string;
  publisher: RedisClient;
  subscriber: RedisClient;
  /** What the bus told its hooks, in order: 'up', 'back', or 'down: <reason>'. */
  said: string[];
  /** Resolves with the next thing the bus tells its hooks. */
  nextSaid(): Promise<string>;
  /** The events its handler got, in order. */
  heard: GatewayEvent[];
  /** Every message on the bus's own connection, each recorded after the bus handled it. */
  onConnection: string[];
  /** Probes on the channel, as another subscriber (the watcher) sees them. */
  probes: string[];
  watcher: RedisClient;
  /** isSubscribed as the bus was made: before any SUBSCRIBE was answered. */
  subscribedWhenMade: boolean;
}

/**
 * One replica's event bus, on its own two connections as createRedisClients makes them. Its
 * subscriber connection is still connecting when the bus is made, unless `ready`; with
 * `closedAtOnce`, the bus is closed as soon as it is made.
 */
async function replica(
  options: { channel?: string; url?: string; ready?: boolean; closedAtOnce?: boolean; probeMs?: number } = {},
): Promise<Replica> {
  // Once per test: installing the fake clock again would drop the timers already on it.
  if (!vi.isFakeTimers()) vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  const url = options.url ?? redis.url;
  const channel = options.channel ?? `events-${Math.random().toString(36).slice(2)}`;
  const { redis: publisher, subscriber } = createRedisClients({ mode: 'standalone', url }, 250);
  if (!subscriber) throw new Error('no subscriber connection');
  cleanups.push(() => {
    publisher.disconnect();
    subscriber.disconnect();
  });
  if (options.ready) await Promise.all([whenReady(publisher), whenReady(subscriber)]);
  const said: string[] = [];
  const heard: GatewayEvent[] = [];
  const onConnection: string[] = [];
  const probes: string[] = [];
  const waiting: Array<(what: string) => void> = [];
  const say = (what: string) => {
    said.push(what);
    for (const resolve of waiting.splice(0)) resolve(what);
  };
  const nextSaid = () => new Promise<string>((resolve) => waiting.push(resolve));
  const bus = new RedisEventBus(
    publisher,
    subscriber,
    channel,
    { onUp: (again) => say(again ? 'back' : 'up'), onDown: (reason) => say(`down: ${reason}`) },
    options.probeMs ?? PROBE_MS,
  );
  cleanups.push(() => bus.close());
  const subscribedWhenMade = bus.isSubscribed;
  // Before anything Redis says can arrive: its first SUBSCRIBE is still unanswered.
  if (options.closedAtOnce) await bus.close();
  bus.subscribe((event) => heard.push(event));
  // Registered after the bus's own listener: a message recorded here has been handled by the bus.
  subscriber.on('message', (_channel: string, message: string) => onConnection.push(message));
  await whenReady(publisher);
  const watcher = await rawClient();
  watcher.on('message', (_channel: string, message: string) => {
    if (message.startsWith('{"probe"')) probes.push(message);
  });
  await watcher.subscribe(channel);
  return {
    bus,
    channel,
    publisher,
    subscriber,
    said,
    nextSaid,
    heard,
    onConnection,
    probes,
    watcher,
    subscribedWhenMade,
  };
}

/**
 * Once the bus's subscriber connection is up, the bus has heard so (ioredis says 'ready' on the
 * next tick, after sending what it queued meanwhile), the replies to all it has sent are read,
 * and so is every message of a PUBLISH Redis answered before.
 */
async function subscriberCaughtUp(r: Replica): Promise<void> {
  await whenReady(r.subscriber);
  await settled();
  await r.subscriber.ping();
  await settled();
}

/**
 * Advances the clock by one probe interval. Unless `published` is false (the publisher cannot
 * reach Redis), resolves once Redis took the probe and, if the bus's subscription delivers, the
 * bus has had it back.
 */
async function probe(r: Replica, { published = true } = {}): Promise<void> {
  const before = r.probes.length;
  vi.advanceTimersByTime(PROBE_MS);
  if (published) {
    // The probe's PUBLISH went out on this connection before this PING: it has been answered.
    await r.publisher.ping();
    await r.watcher.ping();
    expect(r.probes.length, 'the probe went out').toBe(before + 1);
  }
  if (r.subscriber.status === 'ready') await r.subscriber.ping();
  await settled();
}

/** Lets ioredis's status events ('close', 'end') of a connection closed by the test reach the bus. */
async function closed(client: RedisClient): Promise<void> {
  const ended = once(client, 'end');
  client.disconnect();
  await ended;
  await settled();
}

describe('the key-event bus between replicas (Redis pub/sub)', () => {
  it('delivers the key events another replica publishes, in order, and nothing else sent on the channel', async () => {
    const r = await replica({ ready: true });
    await subscriberCaughtUp(r);
    const other = await replica({ channel: r.channel, ready: true });
    const raw = await rawClient();
    for (const message of [
      'not json',
      'null',
      '42',
      '[]',
      '{"type":"key-revoked"}',
      '{"type":"key-revoked","id":7}',
      '{"type":"key-expired","id":"key_a"}',
      '{"type":"missed-events"}',
      '{"probe":"another-replica:1"}',
    ])
      await raw.publish(r.channel, message);
    const sent: GatewayEvent[] = [
      { type: 'key-revoked', id: 'key_1' },
      { type: 'key-changed', id: 'key_2' },
      { type: 'ban-lifted', id: 'key_3' },
    ];
    for (const event of sent) await other.bus.publish(event);
    await subscriberCaughtUp(r);
    expect(r.onConnection).toHaveLength(12);
    expect(r.heard).toEqual(sent);
    expect(r.said).toEqual(['up']);
  });

  it('ignores messages on other channels its connection is subscribed to', async () => {
    const r = await replica({ ready: true });
    await subscriberCaughtUp(r);
    await r.subscriber.subscribe(`${r.channel}-other`);
    const raw = await rawClient();
    await raw.publish(`${r.channel}-other`, JSON.stringify({ type: 'key-revoked', id: 'key_elsewhere' }));
    await raw.publish(r.channel, JSON.stringify({ type: 'key-revoked', id: 'key_here' }));
    await subscriberCaughtUp(r);
    expect(r.onConnection).toHaveLength(2);
    expect(r.heard).toEqual([{ type: 'key-revoked', id: 'key_here' }]);
  });

  it('subscribes at once when made on a connection that is already up, and says so once', async () => {
    const r = await replica({ ready: true });
    expect(r.subscribedWhenMade).toBe(false);
    await subscriberCaughtUp(r);
    expect(r.said).toEqual(['up']);
    expect(r.bus.isSubscribed).toBe(true);
  });

  it('subscribes as soon as its connection is up when made on one still connecting', async () => {
    const r = await replica();
    expect(r.subscribedWhenMade).toBe(false);
    await whenReady(r.subscriber);
    await subscriberCaughtUp(r);
    expect(r.said).toEqual(['up']);
    expect(r.bus.isSubscribed).toBe(true);
  });

  it('stays up, saying nothing more and sending Redis no SUBSCRIBE, while its probes come back', async () => {
    const r = await replica({ ready: true });
    await subscriberCaughtUp(r);
    const before = await commandCalls();
    for (let i = 0; i < 3; i++) await probe(r);
    const after = await commandCalls();
    expect(r.probes).toHaveLength(3);
    expect(r.said).toEqual(['up']);
    expect(r.bus.isSubscribed).toBe(true);
    expect(after.subscribe).toBe(before.subscribe);
    expect(after.publish - before.publish).toBe(3);
  });

  it('says it is down when its connection closes, then back, subscribed again, with a missed-events event', async () => {
    const r = await replica({ ready: true });
    await subscriberCaughtUp(r);
    await closed(r.subscriber);
    expect(r.said).toHaveLength(2);
    expect(r.said[1]).toMatch(/^down: .*connection closed/);
    expect(r.bus.isSubscribed).toBe(false);
    // Probes go out while it is down; none can come back.
    for (let i = 0; i < 2; i++) await probe(r);

    await r.subscriber.connect();
    await subscriberCaughtUp(r);
    expect(r.said.slice(2)).toEqual(['back']);
    expect(r.bus.isSubscribed).toBe(true);
    // Bans lifted meanwhile were published to nobody: the limiter is told to forget what it remembers.
    expect(r.heard).toEqual([{ type: 'missed-events' }]);

    // The probes sent while it was down count for nothing: up it stays as the next ones come back.
    for (let i = 0; i < 2; i++) await probe(r);
    expect(r.said).toHaveLength(3);
    const raw = await rawClient();
    await raw.publish(r.channel, JSON.stringify({ type: 'key-changed', id: 'key_after' }));
    await subscriberCaughtUp(r);
    expect(r.heard[1]).toEqual({ type: 'key-changed', id: 'key_after' });
  });

  it('says it is down when a probe does not come back on a connection that stays open, and back only when one of its own does', async () => {
    const r = await replica({ ready: true });
    await subscriberCaughtUp(r);
    await probe(r);
    // The subscription is lost without a word (as when a Cluster moves it): the connection stays up.
    await r.subscriber.unsubscribe(r.channel);
    await probe(r);
    expect(r.said).toEqual(['up']);

    // The next probe finds the last one missing; it subscribes again, and its own probe cannot go out.
    await closed(r.publisher);
    await probe(r, { published: false });
    expect(r.said).toHaveLength(2);
    expect(r.said[1]).toMatch(/^down: .*probe/);
    // Subscribed again (an event gets through), but a SUBSCRIBE reply proves nothing after a lost probe...
    const raw = await rawClient();
    await raw.publish(r.channel, JSON.stringify({ type: 'key-revoked', id: 'key_1' }));
    await subscriberCaughtUp(r);
    expect(r.heard).toEqual([{ type: 'key-revoked', id: 'key_1' }]);
    expect(r.said).toHaveLength(2);
    // ... nor does another replica's probe.
    const messages = r.onConnection.length;
    await raw.publish(r.channel, '{"probe":"another-replica:99"}');
    await subscriberCaughtUp(r);
    expect(r.onConnection).toHaveLength(messages + 1);
    expect(r.said).toHaveLength(2);
    expect(r.bus.isSubscribed).toBe(false);

    // One of its own probes comes back: up again, and told to forget what it may have missed.
    await r.publisher.connect();
    await whenReady(r.publisher);
    await probe(r);
    expect(r.said.slice(2)).toEqual(['back']);
    expect(r.bus.isSubscribed).toBe(true);
    expect(r.heard).toEqual([{ type: 'key-revoked', id: 'key_1' }, { type: 'missed-events' }]);
  });

  it('sends one SUBSCRIBE at a time: a probe due while one is unanswered sends no other', async () => {
    const r = await replica({ ready: true });
    await subscriberCaughtUp(r);
    await probe(r);
    await r.subscriber.unsubscribe(r.channel);
    await probe(r);
    const before = await commandCalls();
    // Two probes due at once: the first finds its last one missing and subscribes again; the
    // second comes while that SUBSCRIBE is unanswered.
    vi.advanceTimersByTime(2 * PROBE_MS);
    await subscriberCaughtUp(r);
    expect((await commandCalls()).subscribe - before.subscribe).toBe(1);
  });

  it('retries a refused SUBSCRIBE at each probe, saying why once, and is up once Redis allows it', async () => {
    const user = await refusedUser();
    const r = await replica({ url: user.url, ready: true });
    await subscriberCaughtUp(r);
    expect(r.said).toHaveLength(1);
    expect(r.said[0]).toMatch(/^down: SUBSCRIBE failed: .*NOPERM/);
    // Its probes are refused too (PUBLISH needs the channel as well).
    await probe(r, { published: false });
    await subscriberCaughtUp(r);
    expect(r.said).toHaveLength(1);

    await user.allow();
    await probe(r);
    await subscriberCaughtUp(r);
    expect(r.said).toHaveLength(2);
    expect(r.said[1]).toMatch(/^(up|back)$/);
    expect(r.bus.isSubscribed).toBe(true);
  });

  it('retries a refused SUBSCRIBE by itself, without waiting for a probe, and is up once Redis allows it', async () => {
    const user = await refusedUser();
    // A probe period longer than the test may last: the first retry comes well before it.
    const r = await replica({ url: user.url, ready: true, probeMs: 600_000 });
    await subscriberCaughtUp(r);
    expect(r.said[0]).toMatch(/^down: SUBSCRIBE failed: .*NOPERM/);
    const next = r.nextSaid();
    await user.allow();
    // The probe clock never moves here: only the bus's own retry, on a real timer, can subscribe
    // it again (without it, or with its first wait the probe period, this waits until the test
    // times out).
    expect(await next).toBe('back');
    expect(r.bus.isSubscribed).toBe(true);
    expect(r.said).toHaveLength(2);
    expect(r.probes).toEqual([]);
  });

  it.each([
    ['accepted', false],
    ['refused', true],
  ])('says nothing once closed, even when its first SUBSCRIBE is %s afterwards', async (_label, refused) => {
    const url = refused ? (await refusedUser()).url : redis.url;
    const r = await replica({ url, ready: true, closedAtOnce: true });
    await subscriberCaughtUp(r);
    expect(r.said).toEqual([]);
    expect(r.bus.isSubscribed).toBe(false);
  });

  it('once closed, leaves none of its listeners on its subscriber connection', async () => {
    const { subscriber } = createRedisClients({ mode: 'standalone', url: redis.url }, 250);
    if (!subscriber) throw new Error('no subscriber connection');
    cleanups.push(() => subscriber.disconnect());
    const events = ['message', 'ready', 'close'] as const;
    const before = events.map((event) => subscriber.listenerCount(event));
    const bus = new RedisEventBus(subscriber, subscriber, 'events-closed', { onUp: () => {}, onDown: () => {} });
    await bus.close();
    expect(events.map((event) => subscriber.listenerCount(event))).toEqual(before);
  });

  it('once closed, hands on no event, sends no probe and says nothing when its connection drops and returns', async () => {
    const r = await replica({ ready: true });
    await subscriberCaughtUp(r);
    await r.bus.close();
    const raw = await rawClient();
    await raw.publish(r.channel, JSON.stringify({ type: 'key-revoked', id: 'key_1' }));
    await subscriberCaughtUp(r);
    expect(r.onConnection).toHaveLength(1);
    vi.advanceTimersByTime(3 * PROBE_MS);
    // Sent after any probe would have been, on the same connection.
    await r.publisher.publish(r.channel, '{"probe":"marker"}');
    await r.watcher.ping();
    expect(r.probes).toEqual(['{"probe":"marker"}']);
    await closed(r.subscriber);
    await r.subscriber.connect();
    await subscriberCaughtUp(r);
    expect(r.heard).toEqual([]);
    expect(r.said).toEqual(['up']);
  });
});

describe('the key-event bus of a single process (no Redis)', () => {
  it('hands each published event to every subscriber, in order, counts as subscribed, and hands on nothing once closed', async () => {
    const bus = new LocalEventBus();
    const first: GatewayEvent[] = [];
    const second: GatewayEvent[] = [];
    bus.subscribe((event) => first.push(event));
    bus.subscribe((event) => second.push(event));
    const sent: GatewayEvent[] = [
      { type: 'key-revoked', id: 'key_1' },
      { type: 'ban-lifted', id: 'key_2' },
    ];
    for (const event of sent) await bus.publish(event);
    expect(first).toEqual(sent);
    expect(second).toEqual(sent);
    expect(bus.isSubscribed).toBe(true);

    await bus.close();
    await bus.publish({ type: 'key-changed', id: 'key_3' });
    expect(first).toEqual(sent);
    expect(second).toEqual(sent);
  });
});

/** Calls of SUBSCRIBE and PUBLISH this Redis has served so far. */
async function commandCalls(): Promise<{ subscribe: number; publish: number }> {
  const stats = await (await rawClient()).info('commandstats');
  const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  return { subscribe: calls('subscribe'), publish: calls('publish') };
}

/** A Redis user allowed every command and key but no pub/sub channel, until `allow()`. */
async function refusedUser(): Promise<{ url: string; allow(): Promise<void> }> {
  const admin = await rawClient();
  const user = `bus${Math.random().toString(36).slice(2, 10)}`;
  await admin.call('ACL', 'SETUSER', user, 'on', '>secret-pw', '~*', '+@all', 'resetchannels');
  cleanups.push(() => admin.call('ACL', 'DELUSER', user));
  return {
    url: `redis://${user}:secret-pw@127.0.0.1:${redis.port}`,
    allow: async () => {
      await admin.call('ACL', 'SETUSER', user, 'allchannels');
    },
  };
}
