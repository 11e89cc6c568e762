import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { RedisProcess, redisCliBinary, redisServerBinary, standalone } from './redis.js';
import { freePort } from './runtime.js';

/**
 * Redis Sentinel and Redis Cluster built from the redis-server binary on free loopback ports,
 * with short timeouts so a failover takes seconds. Each topology says which master serves a key
 * and can kill it (SIGKILL, a crash) and tell when its replica has taken over.
 */

/** How long a node may be unreachable before the others fail it over (Cluster and Sentinel alike). */
const NODE_TIMEOUT_MS = 1_000;

export interface Failover {
  /** The killed master's port and its replicas' (one of which takes over). */
  master: number;
  replicas: number[];
  killedAt: number;
  /** Resolves with the time the promoted replica took writes for the key (polled every 50 ms). */
  promoted: Promise<number>;
}

export interface RedisTopology {
  mode: 'cluster' | 'sentinel';
  /** The gateway's environment for this topology. */
  env: Record<string, string>;
  /** The data node that takes writes for keys hashed by `slotKey` (the hash tag: a key id). */
  masterFor(slotKey: string): Promise<RedisProcess>;
  /** Waits until every replica is in sync with its master, then SIGKILLs the master serving `slotKey`. */
  killMasterFor(slotKey: string): Promise<Failover>;
  stop(): Promise<void>;
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 50 ms until it returns a value; throws with `what` after `timeoutMs`. */
async function poll<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms${last ? ` (last: ${last})` : ''}`);
    await delay(50);
  }
}

/** A short-lived control connection to one node (not the gateway's: these may block and retry freely). */
async function control<T>(port: number, use: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

function field(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

/** Until the replica on `port` reports its link to the master up: one that never synced is not promoted. */
function linkUp(port: number): Promise<true> {
  return poll(`replica ${port} in sync`, () =>
    control(port, async (r) => (field(await r.info('replication'), 'master_link_status') === 'up' ? true : undefined)),
  );
}

async function isMaster(port: number): Promise<boolean> {
  return control(port, async (r) => field(await r.info('replication'), 'role') === 'master');
}

/** Three masters with one replica each, made by `redis-cli --cluster create`. */
export class RedisClusterTopology implements RedisTopology {
  readonly mode = 'cluster' as const;
  private readonly alive = new Set<RedisProcess>();

  private constructor(
    private readonly dir: string,
    private readonly nodes: RedisProcess[],
  ) {
    for (const node of nodes) this.alive.add(node);
  }

  get env(): Record<string, string> {
    return { REDIS_CLUSTER_NODES: [...this.alive].map((n) => `127.0.0.1:${n.port}`).join(',') };
  }

  static async start(): Promise<RedisClusterTopology> {
    // Both fail with the one-line MissingPrerequisite when absent, before anything is started.
    const cli = redisCliBinary();
    redisServerBinary();
    const dir = await mkdtemp(join(tmpdir(), 'redis-cluster-'));
    const ports = await Promise.all(Array.from({ length: 6 }, () => freePort({ clusterBus: true })));
    const nodes = await Promise.all(
      ports.map((port) =>
        RedisProcess.start(port, (p) => [
          ...standalone(p),
          '--dir',
          dir,
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          `nodes-${p}.conf`,
          '--cluster-node-timeout',
          String(NODE_TIMEOUT_MS),
        ]),
      ),
    );
    const topology = new RedisClusterTopology(dir, nodes);
    try {
      await promisify(execFile)(
        cli,
        ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'],
        { timeout: 30_000 },
      );
      for (const node of nodes) {
        await poll(`cluster_state:ok on ${node.port}`, () =>
          control(node.port, async (r) =>
            field(await r.cluster('INFO'), 'cluster_state') === 'ok' ? true : undefined,
          ),
        );
      }
      // Replicas join their masters after `create` returns; every shard must list one.
      await poll('every master listed with a replica', () =>
        control(ports[0] as number, async (r) =>
          (await r.cluster('SLOTS')).every((range) => range.length >= 4) ? true : undefined,
        ),
      );
    } catch (err) {
      await topology.stop();
      throw err;
    }
    return topology;
  }

  private node(port: number): RedisProcess {
    const node = this.nodes.find((n) => n.port === port);
    if (!node) throw new Error(`no node on port ${port}`);
    return node;
  }

  /** [master port, replica ports] of the slot `slotKey` hashes to, as a live node sees it. */
  private async shardOf(slotKey: string): Promise<{ master: number; replicas: number[] }> {
    const [first] = this.alive;
    if (!first) throw new Error('no live node');
    return control(first.port, async (r) => {
      const slot = (await r.cluster('KEYSLOT', slotKey)) as number;
      const range = (await r.cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end);
      const [, , master, ...replicas] = range ?? [];
      if (!master) throw new Error(`slot ${slot} is not served`);
      return { master: master[1], replicas: replicas.map((node) => node[1]) };
    });
  }

  async masterFor(slotKey: string): Promise<RedisProcess> {
    return this.node((await this.shardOf(slotKey)).master);
  }

  async killMasterFor(slotKey: string): Promise<Failover> {
    const { master, replicas } = await this.shardOf(slotKey);
    if (replicas.length === 0) throw new Error(`master ${master} has no replica`);
    for (const port of replicas) await linkUp(port);
    const node = this.node(master);
    // Taken before the kill: the gateways see the connection drop (and may answer 503) before
    // this process handles the exit, so a request can end refused before `await kill()` returns.
    const killedAt = Date.now();
    await node.kill();
    this.alive.delete(node);
    const promoted = poll('a replica promoted', async () => {
      for (const port of replicas) {
        const ok = await control(port, async (r) => {
          const role = field(await r.info('replication'), 'role');
          return role === 'master' && field(await r.cluster('INFO'), 'cluster_state') === 'ok';
        }).catch(() => false);
        if (ok) return Date.now();
      }
      return undefined;
    });
    return { master, replicas, killedAt, promoted };
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill()));
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** One master, two replicas and three sentinels (quorum 2), master name `mymaster`. */
export class RedisSentinelTopology implements RedisTopology {
  readonly mode = 'sentinel' as const;
  static readonly MASTER = 'mymaster';

  private constructor(
    private readonly dir: string,
    private readonly data: RedisProcess[],
    private readonly sentinels: RedisProcess[],
  ) {}

  get env(): Record<string, string> {
    return {
      REDIS_SENTINELS: this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      REDIS_SENTINEL_MASTER: RedisSentinelTopology.MASTER,
    };
  }

  static async start(): Promise<RedisSentinelTopology> {
    redisServerBinary();
    const dir = await mkdtemp(join(tmpdir(), 'redis-sentinel-'));
    const started: RedisProcess[] = [];
    try {
      // A replica keeps the snapshot it synced from in its --dir: the temporary one, not the cwd.
      const node = (p: number) => [...standalone(p), '--dir', dir];
      const master = await RedisProcess.start(undefined, node);
      started.push(master);
      for (let i = 0; i < 2; i++) {
        started.push(
          await RedisProcess.start(undefined, (p) => [...node(p), '--replicaof', '127.0.0.1', String(master.port)]),
        );
      }
      const data = [...started];
      const sentinels: RedisProcess[] = [];
      for (let i = 0; i < 3; i++) {
        const port = await freePort();
        const conf = join(dir, `sentinel-${port}.conf`);
        // Sentinel rewrites its config file (what it learned), so each gets a writable one.
        await writeFile(
          conf,
          [
            `port ${port}`,
            'bind 127.0.0.1',
            `sentinel monitor ${RedisSentinelTopology.MASTER} 127.0.0.1 ${master.port} 2`,
            `sentinel down-after-milliseconds ${RedisSentinelTopology.MASTER} ${NODE_TIMEOUT_MS}`,
            `sentinel failover-timeout ${RedisSentinelTopology.MASTER} 3000`,
            `sentinel parallel-syncs ${RedisSentinelTopology.MASTER} 2`,
            '',
          ].join('\n'),
        );
        const sentinel = await RedisProcess.start(port, () => [conf, '--sentinel', '--loglevel', 'warning']);
        started.push(sentinel);
        sentinels.push(sentinel);
      }
      const topology = new RedisSentinelTopology(dir, data, sentinels);
      // A failover needs a quorum that knows the replicas and a majority that knows each other.
      for (const sentinel of sentinels) {
        await poll(`sentinel ${sentinel.port} sees 2 replicas and 2 sentinels`, () =>
          control(sentinel.port, async (r) => {
            const replicas = (await r.call('SENTINEL', 'REPLICAS', RedisSentinelTopology.MASTER)) as unknown[];
            const peers = (await r.call('SENTINEL', 'SENTINELS', RedisSentinelTopology.MASTER)) as unknown[];
            return replicas.length === 2 && peers.length === 2 ? true : undefined;
          }),
        );
      }
      return topology;
    } catch (err) {
      await Promise.all(started.map((p) => p.kill()));
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** The master the sentinels name now. */
  private async masterPort(): Promise<number> {
    const [first] = this.sentinels;
    if (!first) throw new Error('no sentinel');
    return control(first.port, async (r) => {
      const [, port] = (await r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', RedisSentinelTopology.MASTER)) as [
        string,
        string,
      ];
      return Number(port);
    });
  }

  async masterFor(_slotKey: string): Promise<RedisProcess> {
    const port = await this.masterPort();
    const master = this.data.find((d) => d.port === port);
    if (!master) throw new Error(`sentinels name an unknown master ${port}`);
    return master;
  }

  async killMasterFor(slotKey: string): Promise<Failover> {
    const master = await this.masterFor(slotKey);
    const replicas: number[] = [];
    for (const d of this.data) {
      if (d !== master && (await control(d.port, async () => true).catch(() => false))) replicas.push(d.port);
    }
    if (replicas.length === 0) throw new Error('no live replica');
    for (const port of replicas) await linkUp(port);
    // Taken before the kill, as for the Cluster: a request can end refused before `await kill()` returns.
    const killedAt = Date.now();
    await master.kill();
    const promoted = poll('the sentinels promoted a replica', async () => {
      const port = await this.masterPort();
      return port !== master.port && replicas.includes(port) && (await isMaster(port)) ? Date.now() : undefined;
    });
    return { master: master.port, replicas, killedAt, promoted };
  }

  async stop(): Promise<void> {
    await Promise.all([...this.sentinels, ...this.data].map((p) => p.kill()));
    await rm(this.dir, { recursive: true, force: true });
  }
}
