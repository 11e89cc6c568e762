import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildServiceImages, imageSet } from '../support/containers.js';
import { freePort } from '../support/runtime.js';
import { REPO_ROOT } from '../support/stack.js';

/**
 * docker-compose.yml started through the engine: up, a key made on the admin port, a request
 * through the gateway's public port, the customers' portal page on its own port, down; and nothing of the project left, container or network.
 * - Docker: `docker compose` on the file as it is (mongo:7.0, redis:7.4-alpine, images built).
 * - The local podman: podman-compose with deploy/compose/embedded.yml (no MongoDB image: the
 *   in-memory stores), on the service images this run built, tagged as the override names them.
 *   Debian's docker-compose 1.29 refuses the file's top-level `name:`; podman-compose reads it.
 */

const run = promisify(execFile);
const local = process.env.ANIMAL_STORE_LOCAL_IMAGES === '1';
const project = `animal-store-ct${randomBytes(3).toString('hex')}`;
const files = local ? ['-f', 'docker-compose.yml', '-f', 'deploy/compose/embedded.yml'] : ['-f', 'docker-compose.yml'];
const adminToken = `compose-${randomBytes(16).toString('hex')}`;
let env: NodeJS.ProcessEnv;
let gatewayPort: number;
let adminPort: number;
let portalPort: number;

function compose(args: string[]): Promise<{ stdout: string; stderr: string }> {
  const [command, prefix] = local
    ? ['podman-compose', ['-p', project, ...files]]
    : ['docker', ['compose', '-p', project, ...files]];
  return run(command, [...prefix, ...args], { cwd: REPO_ROOT, env, maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
}

/** The project's containers, whatever their state. */
async function projectContainers(): Promise<string[]> {
  const [engine, label] = local
    ? ['podman', `io.podman.compose.project=${project}`]
    : ['docker', `com.docker.compose.project=${project}`];
  const { stdout } = await run(engine, ['ps', '-a', '--filter', `label=${label}`, '--format', '{{.Names}}'], { env });
  return stdout.split('\n').filter(Boolean);
}

/** The project's networks (podman-compose labels them as docker compose does). */
async function projectNetworks(): Promise<string[]> {
  const engine = local ? 'podman' : 'docker';
  const { stdout } = await run(
    engine,
    ['network', 'ls', '--filter', `label=com.docker.compose.project=${project}`, '--format', '{{.Name}}'],
    { env },
  );
  return stdout.split('\n').filter(Boolean);
}

async function down(): Promise<void> {
  await compose(['down', '-v', '-t', '10']);
  // podman-compose 1.0.3 stops and removes the containers but leaves the network it made.
  if (local) for (const network of await projectNetworks()) await run('podman', ['network', 'rm', network], { env });
}

beforeAll(async () => {
  gatewayPort = await freePort();
  adminPort = await freePort();
  portalPort = await freePort();
  env = {
    ...process.env,
    ADMIN_TOKEN: adminToken,
    GATEWAY_PORT: String(gatewayPort),
    ADMIN_PORT: String(adminPort),
    PORTAL_PORT: String(portalPort),
    PORTAL_URL: `http://127.0.0.1:${portalPort}`,
    METRICS_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  };
  if (local) {
    // The images this run built from the same Dockerfiles on the same base, under the override's names.
    await buildServiceImages(REPO_ROOT);
    const images = imageSet();
    for (const name of ['pets', 'gateway'] as const) {
      await run('podman', ['tag', images[name], `animal-store/${name}:embedded`], { env });
    }
  }
});

afterAll(async () => {
  // Whatever a failed test left.
  const left = [...(await projectContainers().catch(() => [])), ...(await projectNetworks().catch(() => []))];
  if (left.length > 0) await down().catch(() => {});
});

describe('docker-compose.yml through the engine', () => {
  it('comes up, answers a request through the gateway, and goes down leaving no container', async () => {
    await compose(['up', '-d', ...(local ? [] : ['--build'])]);
    const gateway = `http://127.0.0.1:${gatewayPort}`;
    const admin = `http://127.0.0.1:${adminPort}`;
    await vi.waitFor(
      async () => {
        const ready = await fetch(`${gateway}/readyz`);
        expect(ready.status).toBe(200);
      },
      { timeout: 120_000, interval: 500 },
    );

    const created = await fetch(`${admin}/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'pro', name: 'compose-test' }),
    });
    expect(created.status).toBe(201);
    const { key } = (await created.json()) as { key: string };
    const pet = await fetch(`${gateway}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Compose', categoryId: 1 }),
    });
    expect(pet.status).toBe(201);
    const listed = await fetch(`${gateway}/v1/pets?limit=100`, { headers: { authorization: `Bearer ${key}` } });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as Array<{ name: string }>).map((p) => p.name)).toContain('Compose');

    // The portal's page, from the files the image carries, on the port compose publishes for it.
    const page = await fetch(`http://127.0.0.1:${portalPort}/portal`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);

    expect(await projectContainers()).not.toEqual([]);
    await down();
    expect(await projectContainers()).toEqual([]);
    expect(await projectNetworks()).toEqual([]);
  });
});
