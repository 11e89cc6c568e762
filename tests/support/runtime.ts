import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { nodeTooOld } from '@animal-store/common/node-version.js';

/**
 * A suite's missing prerequisite: vitest prints just its one line (no stack, no code frame), so
 * the reader sees what is missing and how to get it, and nothing else.
 */
export class MissingPrerequisite extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MissingPrerequisite';
    this.stack = `${this.name}: ${message}`;
  }
}

/**
 * A free TCP port on loopback, for processes the tests start themselves: one below the kernel's
 * ephemeral range. A port from listen(0) comes from that range, which every outgoing loopback
 * connection also takes its source port from; with hundreds of connections a second during
 * `npm test`, one could take the port between this check and the child's bind (CI saw
 * EADDRINUSE). Below the range no client socket ever lands; what remains is two callers drawing
 * the same port at once, which the random draw, the bind check and the memory of ports handed out
 * in this process make rare, and ServiceProcess.start retries.
 */
export async function freePort(options: { clusterBus?: boolean } = {}): Promise<number> {
  const [low, rangeHigh] = testPortRange();
  // A Cluster node also listens on its port + 10000 (the cluster bus): both below the range.
  const bus = options.clusterBus ? CLUSTER_BUS_OFFSET : 0;
  const high = rangeHigh - bus;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (handedOut.has(port)) continue;
    if ((await canListen(port)) && (bus === 0 || (await canListen(port + bus)))) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`freePort: no free port in ${low}-${high} after 50 draws`);
}

/** Redis Cluster's bus port is the node's port plus this. */
const CLUSTER_BUS_OFFSET = 10_000;

/** Ports freePort gave in this process: not given twice, even once their holder has closed. */
const handedOut = new Set<number>();

/** The ports freePort draws from: the 12,000 just below the ephemeral range (Linux: 20768-32767). */
function testPortRange(): [number, number] {
  let ephemeralLow = 32768;
  try {
    ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    // Not Linux: the IANA dynamic range starts at 49152, and 32768 is below it as well.
  }
  const high = Math.max(ephemeralLow - 1, 11024);
  return [Math.max(high - 12_000, 1024), high];
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
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

/**
 * The command that renders a kustomization directory: `kubectl kustomize DIR`, else a standalone
 * `kustomize build DIR`; or the one-line failure saying how to get one.
 */
export function kustomizeCommand(): (dir: string) => [string, string[]] {
  const kubectl = which('kubectl');
  if (kubectl) return (dir) => [kubectl, ['kustomize', dir]];
  const kustomize = which('kustomize');
  if (kustomize) return (dir) => [kustomize, ['build', dir]];
  throw new MissingPrerequisite(
    'neither kubectl nor kustomize is on PATH: install one to render deploy/k8s ' +
      '(no Debian package has them: https://kubernetes.io/docs/tasks/tools/)',
  );
}

/** Whether kustomizeCommand has something to run. */
export function kustomizeOnPath(): boolean {
  return which('kubectl') !== null || which('kustomize') !== null;
}

/** script(1), which runs a command on a pseudo-terminal; or the one-line failure saying how to get it. */
export function scriptBinary(): string {
  const binary = which('script');
  if (!binary) {
    throw new MissingPrerequisite('script is not on PATH: install util-linux (apt-get install bsdutils on Debian)');
  }
  return binary;
}

/**
 * A Node.js too old for the services on this machine (the system's /usr/bin/node: 20 on the
 * machines this project runs on, where npm puts the project's own Node 24 first on PATH), or null.
 */
export function olderNode(): { path: string; version: string } | null {
  const path = '/usr/bin/node';
  if (!existsSync(path)) return null;
  const version = execFileSync(path, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
  return nodeTooOld('pets', version) === undefined ? null : { path, version };
}
