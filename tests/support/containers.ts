import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { GenericContainer, StartedTestContainer } from 'testcontainers';
import { type ServiceName, stagePrebuiltContext } from './image-context.js';

/**
 * What the container tier (npm run test:containers) runs on: a Docker Engine with registry access
 * (the official node, mongo and redis images), or the local podman of `npm run containers:setup`
 * (its Docker-API socket, and base images built from Debian packages: no MongoDB image at all).
 */

/** Where `npm run containers:setup` serves podman's Docker API (scripts/containers-setup.sh). */
const PODMAN_SOCKET = '/run/animal-store/podman.sock';

export interface ImageSet {
  /** NODE_IMAGE for the Dockerfiles; undefined: their default (the official Alpine node image). */
  nodeImage: string | undefined;
  redis: string;
  /** null where no MongoDB image exists: the services run their in-memory stores. */
  mongo: string | null;
  /** Tags the service images are built under. */
  pets: string;
  gateway: string;
}

/**
 * Points testcontainers at podman's socket when there is no DOCKER_HOST and the socket exists; a
 * no-op with a Docker Engine. Called from vitest.containers.config.ts, before any test starts.
 */
export function useLocalEngine(repoRoot: string): void {
  if (process.env.DOCKER_HOST || !existsSync(PODMAN_SOCKET)) return;
  process.env.DOCKER_HOST = `unix://${PODMAN_SOCKET}`;
  // The reaper's image cannot be pulled here: every test removes what it starts itself.
  process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
  // Published ports on loopback, never the engine's bridge addresses.
  process.env.TESTCONTAINERS_HOST_OVERRIDE = '127.0.0.1';
  process.env.CONTAINERS_CONF = join(repoRoot, 'deploy/containers/containers.conf');
  process.env.ANIMAL_STORE_LOCAL_IMAGES = '1';
}

export function imageSet(): ImageSet {
  const local = process.env.ANIMAL_STORE_LOCAL_IMAGES === '1';
  return {
    nodeImage: local ? 'animal-store/node:24' : undefined,
    redis: local ? 'animal-store/redis:7' : 'redis:7-alpine',
    mongo: local ? null : 'mongo:7',
    pets: 'animal-store/pets:test',
    gateway: 'animal-store/gateway:test',
  };
}

let built: Promise<void> | undefined;

/**
 * Builds both service images from this repository's Dockerfiles, once per process;
 * vitest.containers.config.ts's global setup builds them before the suites, so there this only
 * finds them. By default their `prebuilt` target, from the dist folders `npm run build` just made
 * and a production node_modules staged on the host (tests/support/image-context.ts): seconds, where
 * the default target's `npm ci` and tsc inside each image take minutes on a cold engine. With
 * ANIMAL_STORE_IMAGES_FROM=source, the default target, as `docker build` and compose build them
 * (the build context is then the repository root).
 */
export function buildServiceImages(repoRoot: string): Promise<void> {
  built ??= (async () => {
    if (process.env.ANIMAL_STORE_IMAGES_BUILT === '1') return;
    const fromSource = process.env.ANIMAL_STORE_IMAGES_FROM === 'source';
    if (fromSource) {
      // One after the other: side by side, two npm ci and two tsc starve a two-core machine.
      for (const name of ['pets', 'gateway'] as const) await buildImage(repoRoot, name, 'source');
    } else {
      await Promise.all((['pets', 'gateway'] as const).map((name) => buildImage(repoRoot, name, 'prebuilt')));
    }
    // For the suites' processes, started after the global setup that built them.
    process.env.ANIMAL_STORE_IMAGES_BUILT = '1';
  })();
  return built;
}

function seconds(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(1);
}

async function buildImage(repoRoot: string, name: ServiceName, from: 'source' | 'prebuilt'): Promise<void> {
  const { GenericContainer } = await import('testcontainers');
  const images = imageSet();
  const buildArgs: Record<string, string> = images.nodeImage ? { NODE_IMAGE: images.nodeImage } : {};
  const started = Date.now();
  let how = 'from source';
  if (from === 'source') {
    await GenericContainer.fromDockerfile(repoRoot, `services/${name}/Dockerfile`)
      .withBuildArgs(buildArgs)
      .build(images[name], { deleteOnExit: false });
  } else {
    const context = await stagePrebuiltContext(repoRoot, name);
    how = `prebuilt target, its context staged in ${seconds(started)} s`;
    try {
      await GenericContainer.fromDockerfile(context)
        .withBuildArgs(buildArgs)
        .withTarget('prebuilt')
        .build(images[name], { deleteOnExit: false });
    } finally {
      await rm(context, { recursive: true, force: true });
    }
  }
  console.log(`[containers] ${images[name]} built (${how}) in ${seconds(started)} s`);
}

/**
 * The hardening docker-compose.yml gives both services: read-only root filesystem, a tmpfs /tmp,
 * no capabilities, no privilege gain. testcontainers has no setter for the read-only root.
 */
export function hardened<T extends GenericContainer>(container: T): T {
  const withHost = container as unknown as { hostConfig: { ReadonlyRootfs?: boolean } };
  withHost.hostConfig.ReadonlyRootfs = true;
  return container
    .withTmpFs({ '/tmp': 'rw,size=64m' })
    .withDroppedCapabilities('ALL')
    .withSecurityOpt('no-new-privileges:true');
}

/** Set on each container `startPublished` starts, to find it again when its start fails. */
const START_LABEL = 'org.animal-store.test-start';

type PortBindings = Record<string, Array<{ HostIp?: string; HostPort: string }>>;

/**
 * Starts a container of `image` with every port the image declares (EXPOSE) published on
 * 127.0.0.1, at a port the engine picks, and removes the container when its start fails.
 *
 * Why every declared port: podman's Docker API lists each EXPOSEd port of the image in the
 * container's HostConfig.PortBindings, bound to nothing, even when it was not asked for;
 * testcontainers waits (a fixed 10 s) for every port listed there to be bound, and so failed on
 * every image here that declares a port a test does not use, e.g. the metrics port
 * (testcontainers-node#1108). Why 127.0.0.1: tests reach containers on loopback only.
 * Why the removal: testcontainers leaves a container whose start or wait strategy failed, and
 * without ryuk nothing else removes it.
 */
export async function startPublished(
  container: GenericContainer,
  image: string,
  ports: number[],
): Promise<StartedTestContainer> {
  const { getContainerRuntimeClient, ImageName } = await import('testcontainers');
  const client = await getContainerRuntimeClient();
  const declared = Object.keys((await client.image.inspect(ImageName.fromString(image))).Config.ExposedPorts ?? {});
  const all = [...new Set([...ports, ...declared.map((port) => Number.parseInt(port, 10))])];
  const mark = randomUUID();
  container.withExposedPorts(...all).withLabels({ [START_LABEL]: mark });
  // testcontainers has no setter for the host address of a published port.
  const host = (container as unknown as { hostConfig: { PortBindings?: PortBindings } }).hostConfig;
  for (const bindings of Object.values(host.PortBindings ?? {})) {
    for (const binding of bindings) binding.HostIp = '127.0.0.1';
  }
  try {
    return await container.start();
  } catch (err) {
    const left = await client.container.fetchByLabel(START_LABEL, mark).catch(() => undefined);
    await left?.remove({ force: true, v: true }).catch(() => {});
    throw err;
  }
}
