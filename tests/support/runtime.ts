import { existsSync } from 'node:fs';
import { createServer } from 'node:net';

/** A free TCP port on loopback, for processes the tests start themselves. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

let runtimeCheck: Promise<string | null> | undefined;

/**
 * Whether a container runtime answers. Looks for a socket before asking testcontainers, which
 * otherwise spends seconds probing strategies on machines that have none.
 */
export function containerRuntime(): Promise<string | null> {
  runtimeCheck ??= (async () => {
    const sockets = ['/var/run/docker.sock', `${process.env.HOME}/.docker/run/docker.sock`];
    if (!process.env.DOCKER_HOST && !sockets.some((s) => existsSync(s))) return null;
    try {
      const { getContainerRuntimeClient } = await import('testcontainers');
      const client = await getContainerRuntimeClient();
      return client.info.containerRuntime.host;
    } catch {
      return null;
    }
  })();
  return runtimeCheck;
}

/** Where on PATH a binary lives, or null. */
export function which(binary: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(`${dir}/${binary}`)) return `${dir}/${binary}`;
  }
  return null;
}
