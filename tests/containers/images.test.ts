import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildServiceImages, hardened, imageSet, startPublished } from '../support/containers.js';
import { REPO_ROOT } from '../support/stack.js';

/**
 * Each service image as docker-compose.yml runs it (read-only root, a tmpfs /tmp, no
 * capabilities): it runs as a non-root user, its own HEALTHCHECK command passes, it cannot write
 * its root filesystem, and on SIGTERM it exits 0 within the grace period the engine gives it
 * (an exit by SIGKILL, past the grace, would be 137).
 */

const GRACE_MS = 10_000;
const images = imageSet();

const services = [
  { name: 'pets', image: images.pets, port: 8090, env: { LOG_LEVEL: 'warn' } },
  {
    name: 'gateway',
    image: images.gateway,
    port: 8080,
    // Alone, without pets or Redis: it runs, and is alive, without them.
    env: { LOG_LEVEL: 'warn', PETS_URL: 'http://pets.invalid:8090', ADMIN_TOKEN: 'images-test-admin-token' },
  },
] as const;

const leftovers: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  await buildServiceImages(REPO_ROOT);
});

afterEach(async () => {
  for (const remove of leftovers.splice(0)) await remove().catch(() => {});
});

describe.each(services)('the $name image', ({ image, port, env }) => {
  it('runs as a non-root user on a read-only root, passes its own health check, and stops on SIGTERM with 0', async () => {
    const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
    const client = await getContainerRuntimeClient();
    const container = await startPublished(
      hardened(new GenericContainer(image))
        // Not production, which requires MongoDB: the in-memory stores, all this test needs.
        .withEnvironment({ NODE_ENV: 'development', ...env })
        .withWaitStrategy(Wait.forHttp('/healthz', port).forStatusCode(200))
        .withStartupTimeout(120_000),
      image,
      [port],
    );
    const handle = client.container.getById(container.getId());
    leftovers.push(() => client.container.remove(handle, { removeVolumes: true }));

    const inspected = await client.container.inspect(handle);
    expect(inspected.Config.User).toBe('node');
    expect(inspected.HostConfig.ReadonlyRootfs).toBe(true);
    const uid = await container.exec(['id', '-u']);
    expect(uid.output.trim()).not.toBe('0');

    // The engine here (podman without systemd) runs no periodic health checks: the test runs the
    // image's own HEALTHCHECK command, as the engine would.
    const check = inspected.Config.Healthcheck?.Test ?? [];
    expect(check[0]).toBe('CMD');
    const health = await container.exec(check.slice(1));
    expect(health.exitCode, health.output).toBe(0);

    const write = await container.exec(['sh', '-c', 'touch /app/written-at-runtime']);
    expect(write.exitCode).not.toBe(0);
    expect((await container.exec(['sh', '-c', 'touch /tmp/scratch'])).exitCode).toBe(0);

    await container.stop({ timeout: GRACE_MS, remove: false });
    const stopped = await client.container.inspect(handle);
    expect(stopped.State.Running).toBe(false);
    expect(stopped.State.ExitCode).toBe(0);
  });
});
