import { redactUrl } from '@animal-store/common/env.js';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';

export interface HostPort {
  host: string;
  port: number;
}

/** Credentials and TLS for Sentinel and Cluster (a standalone REDIS_URL carries its own). */
interface RedisAuth {
  username?: string;
  password?: string;
  tls: boolean;
}

/** Where the gateway's Redis is: exactly one of the three deployments. */
export type RedisTarget =
  | { mode: 'standalone'; url: string }
  | { mode: 'sentinel'; sentinels: HostPort[]; masterName: string; auth: RedisAuth }
  | { mode: 'cluster'; nodes: HostPort[]; auth: RedisAuth };

/** A connection to any of them: the limiter and the event bus use only what both offer. */
export type RedisClient = Redis | Cluster;

export interface RedisClients {
  /** Commands on the request path: fail fast while disconnected. */
  redis: RedisClient;
  /** Pub/sub, which blocks a connection for anything else; queues while disconnected. */
  subscriber: RedisClient | null;
  /**
   * The limit script's: as `redis`, but with no command timeout, since the limiter times its calls
   * itself and must see a reply that comes back after it (RedisKeyLimiter's unanswered). Made when
   * asked (`limiter: true`: the gateway's clients), so a caller that needs none leaves no connection open.
   */
  limiter: RedisClient | null;
}

/** Capped, jittered backoff, so replicas don't stampede a recovering Redis. */
const backoff = (attempt: number): number =>
  Math.min(1_000, 50 * 2 ** Math.min(attempt, 5)) + Math.floor(Math.random() * 100);

/**
 * Options for one connection on the request path: fail fast instead of queueing while
 * disconnected, bound every command by a timeout, and reconnect with capped backoff. No
 * auto-pipelining: the limiter already sends one script call per key per event-loop turn, and
 * ioredis's per-command pipeline bookkeeping cost about 8 µs a request for nothing (CPU profile of
 * the gateway at 1500 req/s: ioredis self time 12 µs a request with it, 4 µs without).
 */
export function redisOptions(commandTimeoutMs: number): RedisOptions {
  return {
    commandTimeout: commandTimeoutMs,
    connectTimeout: 2_000,
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    maxRetriesPerRequest: 0,
    retryStrategy: backoff,
  };
}

/**
 * A subscription has no reply to time. The event bus subscribes once the connection is ready and
 * again after every reconnect (events.ts), so ioredis's own resubscribing, which a connection
 * lost during its ready check defeated, is off.
 */
const SUBSCRIBER: RedisOptions = { enableOfflineQueue: true, commandTimeout: undefined, autoResubscribe: false };

function authOptions(auth: RedisAuth): RedisOptions {
  return {
    ...(auth.username ? { username: auth.username } : {}),
    ...(auth.password ? { password: auth.password } : {}),
    ...(auth.tls ? { tls: {} } : {}),
  };
}

function sentinel(target: Extract<RedisTarget, { mode: 'sentinel' }>, options: RedisOptions): Redis {
  const { username, password } = target.auth;
  return new Redis({
    ...options,
    ...authOptions(target.auth),
    sentinels: target.sentinels,
    name: target.masterName,
    // Sentinels and data nodes share credentials, as managed offerings and the usual charts set them.
    ...(username ? { sentinelUsername: username } : {}),
    ...(password ? { sentinelPassword: password } : {}),
    ...(target.auth.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    // After a crash, reconnecting (with backoff) asks the sentinels again and so finds the promoted
    // replica. ioredis's failoverDetector would reconnect once more on +switch-master, often just
    // after the client found the new master by itself: a second gap for nothing.
    sentinelRetryStrategy: backoff,
    // A master demoted without dying (a manual or forced failover) turns writes into READONLY
    // errors: reconnect, which asks the sentinels for the current master.
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
  });
}

/**
 * Every script later defined on `client` without a fixed number of keys (its first argument is
 * the number: the limiter's, the credit ledger's) goes out on its own, not auto-pipelined. ioredis
 * groups an auto-pipeline by a command's first key, and for a script of its own it takes the first
 * argument, the number ("7"), for one. Such a call then shared a pipeline with any command whose
 * key lives on the node of "7"'s slot, and ioredis refused the pipeline ("All keys in the pipeline
 * should belong to the same slots allocation group"): the limit script beside a webhook event's
 * write failed, and the replica fell back (a topology test admitted 129 to 252 of a customer's 100
 * credits in open mode, 503s in closed). Sent on its own, each goes to its keys' node. Taken from
 * the definition, so a script added later cannot be missed.
 */
function leaveOutOfAutoPipelines(client: Cluster): void {
  const define = client.defineCommand.bind(client);
  client.defineCommand = (name, definition) => {
    if (definition.numberOfKeys === undefined) client.options.autoPipeliningIgnoredCommands?.push(name);
    define(name, definition);
  };
}

function cluster(target: Extract<RedisTarget, { mode: 'cluster' }>, options: RedisOptions): Cluster {
  const { enableOfflineQueue, enableAutoPipelining: _perConnection, retryStrategy: _perNode, ...nodeOptions } = options;
  const clusterOptions: ClusterOptions = {
    redisOptions: { ...nodeOptions, ...authOptions(target.auth) },
    enableOfflineQueue,
    // Kept on a Cluster: without it some of the first script calls on a fresh cluster client fail
    // over to the fallback (two replicas admitted 63 of 150 instead of 60 in the topology test).
    enableAutoPipelining: true,
    // Except for the scripts whose number of keys is their first argument (leaveOutOfAutoPipelines).
    autoPipeliningIgnoredCommands: [],
    clusterRetryStrategy: backoff,
    // Fail a command whose master is gone at once (the limiter's failure mode answers it) instead
    // of retrying it for up to maxRedirections x 100 ms while the cluster promotes a replica.
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 0,
    // A lost master is noticed on the next command to its slots; this also notices a promotion
    // that no command has run into yet (and moves the pub/sub connection off a dead node).
    slotsRefreshInterval: 1_000,
    // Managed TLS endpoints present certificates for their host names, not their addresses.
    ...(target.auth.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
  };
  const client = new Cluster(target.nodes, clusterOptions);
  leaveOutOfAutoPipelines(client);
  // ioredis connects to a node at its first command, and with the offline queue off a second
  // command sent while that connection is still opening fails ("Connection is closed"): two
  // commands for one new node in one turn (the limit script beside another write) sent the first
  // requests to the fallback. Connecting each node as soon as it joins the pool closes that gap.
  client.on('+node', (node: Redis) => {
    if (node.status === 'wait') node.connect().catch(() => {});
  });
  return client;
}

function connect(target: RedisTarget, options: RedisOptions): RedisClient {
  if (target.mode === 'sentinel') return sentinel(target, options);
  if (target.mode === 'cluster') return cluster(target, options);
  return new Redis(target.url, options);
}

/**
 * The gateway's Redis connections for any deployment: the one place they are made, for the server
 * and the tests alike. Errors are reported through failed commands, not as process-level events.
 */
export function createRedisClients(
  target: RedisTarget,
  commandTimeoutMs: number,
  { subscriber = true, limiter = false }: { subscriber?: boolean; limiter?: boolean } = {},
): RedisClients {
  const options = redisOptions(commandTimeoutMs);
  const clients: RedisClients = {
    redis: connect(target, options),
    subscriber: subscriber ? connect(target, { ...options, ...SUBSCRIBER }) : null,
    limiter: limiter ? connect(target, { ...options, commandTimeout: undefined }) : null,
  };
  for (const client of [clients.redis, clients.subscriber, clients.limiter]) client?.on('error', () => {});
  return clients;
}

/** Resolves once a client can take commands (its offline queue is off, so commands before that fail). */
export async function whenReady(client: RedisClient, timeoutMs = 10_000): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`redis not ready within ${timeoutMs} ms`)), timeoutMs);
    const onReady = () => done();
    const onEnd = () => done(new Error('redis connection ended'));
    function done(err?: Error) {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('end', onEnd);
      if (err) reject(err);
      else resolve();
    }
    client.once('ready', onReady);
    client.once('end', onEnd);
  });
}

/** The deployment in one line for the start-up log, without secrets. */
export function describeRedis(target: RedisTarget): string {
  const hosts = (list: HostPort[]) => list.map((h) => `${h.host}:${h.port}`).join(',');
  if (target.mode === 'standalone') return `standalone ${redactUrl(target.url)}`;
  const tls = target.auth.tls ? ' (tls)' : '';
  if (target.mode === 'sentinel') return `sentinel ${target.masterName} via ${hosts(target.sentinels)}${tls}`;
  return `cluster via ${hosts(target.nodes)}${tls}`;
}

/**
 * A connection for the webhook queue (BullMQ), to the same deployment as the others: its worker
 * blocks on commands and must ride out a failover, so no command timeout, commands queue while
 * disconnected and are retried (BullMQ requires maxRetriesPerRequest null). Nothing on the request
 * path waits on it.
 */
export function queueConnection(target: RedisTarget): RedisClient {
  const client = connect(target, {
    connectTimeout: 2_000,
    enableOfflineQueue: true,
    maxRetriesPerRequest: null,
    retryStrategy: backoff,
  });
  client.on('error', () => {});
  return client;
}
