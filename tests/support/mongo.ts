import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { containerRuntime, freePort, which } from './runtime.js';

export interface TestMongo {
  url: string;
  source: 'env' | 'container' | 'process';
  stop(): Promise<void>;
}

export type MongoLookup = { mongo: TestMongo; reason?: undefined } | { mongo: null; reason: string };

/**
 * MongoDB for tests: MONGO_URL, else a container, else a mongod on PATH. Where there is none
 * the caller skips its Mongo suite and prints `reason`; nothing pretends to be MongoDB.
 */
export async function findMongo(): Promise<MongoLookup> {
  if (process.env.MONGO_URL) {
    return { mongo: { url: process.env.MONGO_URL, source: 'env', stop: async () => {} } };
  }
  if (await containerRuntime()) {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('mongo:7')
      .withExposedPorts(27017)
      .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
      .start();
    return {
      mongo: {
        url: `mongodb://${container.getHost()}:${container.getMappedPort(27017)}`,
        source: 'container',
        stop: async () => {
          await container.stop();
        },
      },
    };
  }
  const mongod = which('mongod');
  if (mongod) {
    const port = await freePort();
    const dbpath = mkdtempSync(join(tmpdir(), 'mongod-'));
    const child: ChildProcess = spawn(mongod, ['--port', String(port), '--bind_ip', '127.0.0.1', '--dbpath', dbpath], {
      stdio: 'ignore',
    });
    const url = `mongodb://127.0.0.1:${port}`;
    const { MongoClient } = await import('mongodb');
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 15_000 });
    await client.connect();
    await client.close();
    return {
      mongo: {
        url,
        source: 'process',
        stop: async () => {
          child.kill('SIGTERM');
          rmSync(dbpath, { recursive: true, force: true });
        },
      },
    };
  }
  return { mongo: null, reason: 'no MONGO_URL, no container runtime and no mongod on PATH' };
}
