// A local Redis Cluster (3 masters, 3 replicas) or Sentinel (a master, a replica, 3 sentinels)
// for `npm run bench -- --redis cluster|sentinel`, on free loopback ports. Returns the gateway's
// environment for it. The tests build the same topologies with more checks
// (tests/support/redis-topology.ts); the bench only needs them up.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

const data = (port) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];

async function until(what, check) {
  for (let i = 0; i < 400; i++) {
    try {
      if (await check()) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`bench: ${what} did not happen`);
}

/** Answers from one node, over a throwaway connection. */
async function ask(port, ...command) {
  const redis = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await redis.call(...command);
  } finally {
    redis.disconnect();
  }
}

/** `start(name, command, argv)` spawns a child the bench kills at exit; `freePort()` finds a port. */
export async function startTopology(mode, { start, freePort, dir }) {
  if (mode === 'cluster') {
    const ports = await Promise.all(Array.from({ length: 6 }, () => freePort()));
    for (const port of ports) {
      start('redis-server', 'redis-server', [
        ...data(port),
        '--dir',
        dir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
      ]);
    }
    for (const port of ports) await until(`redis ${port} up`, () => ask(port, 'PING'));
    const nodes = ports.map((p) => `127.0.0.1:${p}`);
    await promisify(execFile)('redis-cli', [
      '--cluster',
      'create',
      ...nodes,
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ]);
    for (const port of ports) {
      await until('cluster_state:ok', async () => (await ask(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'));
    }
    return { REDIS_CLUSTER_NODES: nodes.join(',') };
  }
  if (mode === 'sentinel') {
    const [master, replica] = [await freePort(), await freePort()];
    // The replica keeps the snapshot it synced from in its --dir: the bench's, not the cwd.
    start('redis-server', 'redis-server', [...data(master), '--dir', dir]);
    start('redis-server', 'redis-server', [...data(replica), '--dir', dir, '--replicaof', '127.0.0.1', String(master)]);
    await until('replica in sync', async () =>
      (await ask(replica, 'INFO', 'replication')).includes('master_link_status:up'),
    );
    const sentinels = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(conf, `port ${port}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 ${master} 2\n`);
      start('redis-sentinel', 'redis-server', [conf, '--sentinel']);
      sentinels.push(port);
    }
    for (const port of sentinels) {
      await until('sentinel knows the master', () => ask(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'mymaster'));
    }
    return { REDIS_SENTINELS: sentinels.map((p) => `127.0.0.1:${p}`).join(','), REDIS_SENTINEL_MASTER: 'mymaster' };
  }
  throw new Error(`bench: --redis must be standalone, cluster or sentinel, got ${mode}`);
}
