import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { StartedTestContainer } from 'testcontainers';
import { buildServiceImages, hardened, imageSet, startPublished } from './containers.js';
import { findMongo, type TestMongo } from './mongo.js';
import { startRedis, type TestRedis } from './redis.js';
import { containerRuntime, freePort, MissingPrerequisite } from './runtime.js';
import { migrateMongo, ServiceProcess } from './service-process.js';

/**
 * The whole animal store for cross-service tests, reached only over HTTP: MongoDB, Redis, the pets
 * service and the gateway (with its admin API).
 *
 * - `containers` (TEST_CONTAINERS=1, npm run test:containers): both images are built from this
 *   repository's Dockerfiles (build context = repository root) and run with Redis (and MongoDB,
 *   where an image exists) on one network, hardened and configured as docker-compose.yml does
 *   (NODE_ENV=production); replicas are more gateway containers. With Docker: mongo:7 and
 *   redis:7-alpine; with the local podman of containers:setup: its Debian-built bases, no MongoDB.
 * - `processes` (everything else, plain `npm test`): what can run for real does: Redis from REDIS_URL or a local
 *   redis-server, MongoDB from MONGO_URL or a mongod on PATH (else the in-memory stores), and both
 *   services as `node services/<name>/dist/server.js` processes from the build. One line says what
 *   was skipped.
 */

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** How much of a container's output is kept for error messages. */
const OUTPUT_LIMIT = 64 * 1024;
/** Where the containers mode puts `apiKeysFile` inside the gateway container. */
const CONTAINER_KEYS_FILE = '/etc/animal-store/keys/api-keys.json';

export interface StackOptions {
  /** API_KEYS_FILE for the gateway (hash-only records, e.g. from `keys create --file`); read at start. */
  apiKeysFile?: string;
  /** Extra gateway environment, in both modes (and for replicas started with `startGatewayReplica`). */
  gatewayEnv?: Record<string, string>;
  /** Admin token (16+ characters); generated when omitted. */
  adminToken?: string;
  /** How long to wait for each service's /readyz (default 60 s; image builds are not counted). */
  readyTimeoutMs?: number;
}

interface GatewayReplica {
  url: string;
  adminUrl: string;
  /** Graceful: SIGTERM, then the grace period. */
  stop(): Promise<void>;
  /** Containers mode: SIGKILL, no grace, and the container removed. */
  kill?(): Promise<void>;
}

export interface Stack {
  /** Public gateway base URL (no trailing slash); the API is under /v1. */
  gatewayUrl: string;
  /** Admin API base URL; send `Authorization: Bearer ${adminToken}`. */
  adminUrl: string;
  adminToken: string;
  /** The pets service as reachable from this host (tests go through the gateway; replicas need it). */
  petsUrl: string;
  /** The Redis the gateway uses, by a URL reachable from this host. */
  redis: TestRedis;
  /** The gateway's Redis key prefix; replicas of one deployment share it. */
  redisPrefix: string;
  /** MongoDB reachable from this host, or null where the in-memory stores run. */
  mongoUrl: string | null;
  mode: 'containers' | 'processes';
  /** What this run could not exercise for real (empty in containers mode). */
  skipped: string[];
  /**
   * Starts one more gateway, as a process on this host, sharing this stack's Redis (and MongoDB,
   * when there is one) and upstream: a second replica of the same deployment. Stopped by stop().
   */
  startGatewayReplica(options?: { apiKeysFile?: string; env?: Record<string, string> }): Promise<GatewayReplica>;
  stop(): Promise<void>;
}

interface GatewayProcessOptions {
  redisUrl: string;
  redisPrefix: string;
  petsUrl: string;
  mongoUrl: string | null;
  adminToken: string;
  apiKeysFile: string | undefined;
  env: Record<string, string> | undefined;
  readyTimeoutMs: number;
}

async function startGatewayProcess(
  options: GatewayProcessOptions,
): Promise<{ process: ServiceProcess; url: string; adminUrl: string }> {
  const adminPort = await freePort();
  const gateway = await ServiceProcess.start(
    'gateway',
    {
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      PORTAL_PORT: '0',
      ADMIN_TOKEN: options.adminToken,
      PETS_URL: options.petsUrl,
      REDIS_URL: options.redisUrl,
      REDIS_PREFIX: options.redisPrefix,
      LOG_LEVEL: 'warn',
      SHUTDOWN_GRACE_MS: '2000',
      ...(options.mongoUrl ? { MONGO_URL: options.mongoUrl } : {}),
      ...(options.apiKeysFile ? { API_KEYS_FILE: options.apiKeysFile } : {}),
      ...options.env,
    },
    { ready: '/readyz', timeoutMs: options.readyTimeoutMs },
  );
  return { process: gateway, url: gateway.url, adminUrl: `http://127.0.0.1:${adminPort}` };
}

// ---------------------------------------------------------------------------------------------

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const adminToken = options.adminToken ?? `it-${randomBytes(18).toString('base64url')}`;
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  // Containers only in the container tier (npm run test:containers): plain `npm test` never
  // builds an image, whatever engine the machine has.
  if (process.env.TEST_CONTAINERS !== '1') return startProcesses(options, adminToken, readyTimeoutMs);
  if (!(await containerRuntime())) {
    throw new MissingPrerequisite(
      'TEST_CONTAINERS=1 but no container engine answers: run `npm run containers:setup` (or start Docker)',
    );
  }
  return startContainers(options, adminToken, readyTimeoutMs);
}

/** Runs cleanup steps in order, all of them even when some fail; throws the first failure. */
async function runAll(steps: Array<() => Promise<unknown>>): Promise<void> {
  let first: unknown;
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      first ??= err;
    }
  }
  if (first !== undefined) throw first;
}

function replicaStarter(
  base: Omit<GatewayProcessOptions, 'apiKeysFile' | 'env'>,
  gatewayEnv: Record<string, string> | undefined,
  replicas: ServiceProcess[],
): Stack['startGatewayReplica'] {
  return async (replicaOptions = {}) => {
    const started = await startGatewayProcess({
      ...base,
      apiKeysFile: replicaOptions.apiKeysFile,
      env: { ...gatewayEnv, ...replicaOptions.env },
    });
    replicas.push(started.process);
    return { url: started.url, adminUrl: started.adminUrl, stop: () => started.process.stop() };
  };
}

async function startProcesses(options: StackOptions, adminToken: string, readyTimeoutMs: number): Promise<Stack> {
  const cleanup: Array<() => Promise<unknown>> = [];
  const replicas: ServiceProcess[] = [];
  try {
    const redis = await startRedis();
    cleanup.unshift(() => redis.stop());
    const lookup = await findMongo();
    const mongo: TestMongo | null = lookup.mongo;
    if (mongo) cleanup.unshift(() => mongo.stop());
    // As a deployment does: the migration first, or the services refuse to start.
    if (mongo) await migrateMongo(mongo.url);

    const pets = await ServiceProcess.start(
      'pets',
      { LOG_LEVEL: 'warn', SHUTDOWN_GRACE_MS: '2000', ...(mongo ? { MONGO_URL: mongo.url } : {}) },
      { ready: '/readyz', timeoutMs: readyTimeoutMs },
    );
    cleanup.unshift(() => pets.stop());
    const petsUrl = pets.url;

    // Its own prefix, so a Redis shared through REDIS_URL never mixes this stack's counters with another's.
    const redisPrefix = `it${randomUUID().slice(0, 8)}:`;
    const base = {
      redisUrl: redis.url,
      redisPrefix,
      petsUrl,
      mongoUrl: mongo?.url ?? null,
      adminToken,
      readyTimeoutMs,
    };
    const gateway = await startGatewayProcess({
      ...base,
      apiKeysFile: options.apiKeysFile,
      env: options.gatewayEnv,
    });
    cleanup.unshift(() => gateway.process.stop());
    cleanup.unshift(() => Promise.all(replicas.map((r) => r.stop())));

    const skipped = ['container images'];
    if (!mongo) skipped.push('MongoDB');
    const redisSource = redis.source === 'env' ? 'Redis from REDIS_URL' : 'local redis-server';
    const store = mongo
      ? `MongoDB from ${mongo.source === 'env' ? 'MONGO_URL' : 'a local mongod'}`
      : 'the in-memory pet store';
    console.warn(
      `[integration] no container runtime: running services as processes with ${redisSource} and ${store}; skipped: ${skipped.join(', ')}`,
    );

    return {
      gatewayUrl: gateway.url,
      adminUrl: gateway.adminUrl,
      adminToken,
      petsUrl,
      redis,
      redisPrefix,
      mongoUrl: mongo?.url ?? null,
      mode: 'processes',
      skipped,
      startGatewayReplica: replicaStarter(base, options.gatewayEnv, replicas),
      stop: () => runAll(cleanup.splice(0)),
    };
  } catch (err) {
    await runAll(cleanup.splice(0)).catch(() => {});
    throw err;
  }
}

interface GatewayContainerOptions {
  adminToken: string;
  apiKeysFile: string | undefined;
  env: Record<string, string> | undefined;
  readyTimeoutMs: number;
}

async function startContainers(options: StackOptions, adminToken: string, readyTimeoutMs: number): Promise<Stack> {
  const { GenericContainer, Network, Wait } = await import('testcontainers');
  type Started = StartedTestContainer;
  const images = imageSet();
  const cleanup: Array<() => Promise<unknown>> = [];
  const logs = new Map<string, string>();
  const collect = (name: string) => (stream: NodeJS.ReadableStream) => {
    stream.on('data', (chunk: Buffer | string) => {
      logs.set(name, ((logs.get(name) ?? '') + chunk.toString()).slice(-OUTPUT_LIMIT));
    });
  };
  const stopOf = new Map<Started, () => Promise<unknown>>();
  const started = async (name: string, start: () => Promise<Started>): Promise<Started> => {
    try {
      const container = await start();
      const stop = () => container.stop({ timeout: 10_000 });
      stopOf.set(container, stop);
      cleanup.unshift(stop);
      return container;
    } catch (err) {
      const output = logs.get(name)?.trim();
      const message = err instanceof Error ? err.message : String(err);
      throw new Error(`${name} container did not start: ${message}${output ? `\nIts output:\n${output}` : ''}`);
    }
  };
  const url = (container: Started, port: number) => `http://${container.getHost()}:${container.getMappedPort(port)}`;

  try {
    const network = await new Network().start();
    cleanup.unshift(() => network.stop());
    // Both images from this repository, as `docker build -f services/<name>/Dockerfile .` builds them.
    await buildServiceImages(REPO_ROOT);

    const mongoImage = images.mongo;
    const mongo = mongoImage
      ? await started('mongo', () =>
          startPublished(
            new GenericContainer(mongoImage)
              .withNetwork(network)
              .withNetworkAliases('mongo')
              .withLogConsumer(collect('mongo'))
              .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
              .withStartupTimeout(readyTimeoutMs),
            mongoImage,
            [27017],
          ),
        )
      : null;
    // NODE_ENV=production requires MONGO_URL; without MongoDB the services run their in-memory stores.
    const mongoEnv: Record<string, string> = mongo
      ? { NODE_ENV: 'production', MONGO_URL: 'mongodb://mongo:27017' }
      : { NODE_ENV: 'development' };
    // As the compose one-shots and the Kubernetes Job do: each service's migration, run to its end,
    // before the service (it refuses to start without its indexes).
    if (mongo) {
      for (const name of ['pets', 'gateway'] as const) {
        await started(`migrate-${name}`, () =>
          hardened(new GenericContainer(images[name]))
            .withNetwork(network)
            .withEnvironment({ MONGO_URL: 'mongodb://mongo:27017' })
            .withCommand(['node', `services/${name}/dist/server.js`, 'migrate'])
            .withLogConsumer(collect(`migrate-${name}`))
            .withWaitStrategy(Wait.forOneShotStartup())
            .withStartupTimeout(readyTimeoutMs)
            .start(),
        );
      }
    }
    const redisContainer = await started('redis', () =>
      startPublished(
        new GenericContainer(images.redis)
          .withNetwork(network)
          .withNetworkAliases('redis')
          .withLogConsumer(collect('redis'))
          .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
          .withStartupTimeout(readyTimeoutMs),
        images.redis,
        [6379],
      ),
    );

    const pets = await started('pets', () =>
      startPublished(
        hardened(new GenericContainer(images.pets))
          .withNetwork(network)
          .withNetworkAliases('pets')
          .withEnvironment({ PORT: '8090', LOG_LEVEL: 'warn', ...mongoEnv })
          .withLogConsumer(collect('pets'))
          .withWaitStrategy(Wait.forHttp('/readyz', 8090).forStatusCode(200))
          .withStartupTimeout(readyTimeoutMs),
        images.pets,
        [8090],
      ),
    );

    let replicaCount = 0;
    const startGateway = (gateway: GatewayContainerOptions): Promise<Started> => {
      const name = replicaCount === 0 ? 'gateway' : `gateway-${replicaCount}`;
      replicaCount++;
      let container = hardened(new GenericContainer(images.gateway))
        .withNetwork(network)
        .withEnvironment({
          PORT: '8080',
          PETS_URL: 'http://pets:8090',
          REDIS_URL: 'redis://redis:6379/0',
          ADMIN_HOST: '0.0.0.0',
          ADMIN_PORT: '8081',
          ADMIN_TOKEN: gateway.adminToken,
          LOG_LEVEL: 'warn',
          ...mongoEnv,
          ...(gateway.apiKeysFile ? { API_KEYS_FILE: CONTAINER_KEYS_FILE } : {}),
          ...gateway.env,
        })
        .withLogConsumer(collect(name))
        .withWaitStrategy(Wait.forHttp('/readyz', 8080).forStatusCode(200))
        .withStartupTimeout(gateway.readyTimeoutMs);
      if (gateway.apiKeysFile) {
        // Root-owned and world-readable: the image runs as `node` and must only read it.
        container = container.withCopyFilesToContainer([
          { source: gateway.apiKeysFile, target: CONTAINER_KEYS_FILE, mode: 0o444 },
        ]);
      }
      return started(name, () => startPublished(container, images.gateway, [8080, 8081]));
    };

    const gateway = await startGateway({
      adminToken,
      apiKeysFile: options.apiKeysFile,
      env: options.gatewayEnv,
      readyTimeoutMs,
    });

    const redis: TestRedis = {
      url: `redis://${redisContainer.getHost()}:${redisContainer.getMappedPort(6379)}`,
      source: 'container',
      // The container is stopped with the rest of the stack.
      stop: async () => {},
    };
    const mongoUrl = mongo ? `mongodb://${mongo.getHost()}:${mongo.getMappedPort(27017)}` : null;
    const skipped = mongo ? [] : ['MongoDB'];
    console.warn(
      mongo
        ? '[integration] containers mode: gateway and pets images, Redis and MongoDB in containers'
        : `[integration] containers mode: gateway and pets images on ${images.nodeImage}, Redis from ${images.redis}; no MongoDB image exists here, so the in-memory pet and key stores run where it would; skipped: MongoDB`,
    );

    return {
      gatewayUrl: url(gateway, 8080),
      adminUrl: url(gateway, 8081),
      adminToken,
      petsUrl: url(pets, 8090),
      redis,
      // The gateway's default prefix: this Redis belongs to this stack alone.
      redisPrefix: 'gw:',
      mongoUrl,
      mode: 'containers',
      skipped,
      // A replica is one more gateway container of the same image on the same network and Redis.
      startGatewayReplica: async (replica = {}) => {
        const container = await startGateway({
          adminToken,
          apiKeysFile: replica.apiKeysFile,
          env: { ...options.gatewayEnv, ...replica.env },
          readyTimeoutMs,
        });
        const forget = () => {
          const stop = stopOf.get(container);
          if (stop && cleanup.includes(stop)) cleanup.splice(cleanup.indexOf(stop), 1);
        };
        return {
          url: url(container, 8080),
          adminUrl: url(container, 8081),
          stop: async () => {
            forget();
            await container.stop({ timeout: 10_000 });
          },
          kill: async () => {
            forget();
            const { getContainerRuntimeClient } = await import('testcontainers');
            const handle = (await getContainerRuntimeClient()).container.getById(container.getId());
            await handle.kill({ signal: 'SIGKILL' });
            await handle.remove({ force: true, v: true });
          },
        };
      },
      stop: () => runAll(cleanup.splice(0)),
    };
  } catch (err) {
    await runAll(cleanup.splice(0)).catch(() => {});
    throw err;
  }
}
