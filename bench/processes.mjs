// The processes `npm run bench` starts, how it waits for them, and how it ends them (and the
// redis-server `npm run mutate` shares between its test runs).
//
// Every child's stdout is a pipe the bench drains: that is where a service's stdout goes in
// production (a container runtime or a log shipper reads it). A service that logs per request pays
// for its writes, and the machine for the reading, as it would there; /dev/null would hide the
// second half. Every subject gets the same pipe, whether it logs or not.
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

const children = [];
const cleanups = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const cleanup of cleanups.splice(0)) {
    try {
      cleanup();
    } catch {
      // Exiting anyway: what is left is in the temporary folder.
    }
  }
});
// Ctrl-C, a `kill`, a closed terminal: each ends the run through the exit hook above, so no
// subject outlives it (a SIGTERM used to leave every service running and its port taken).
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
]) {
  process.on(signal, () => process.exit(code));
}

/** Runs `cleanup` (synchronous) when the bench exits, however it exits. */
export function atExit(cleanup) {
  cleanups.push(cleanup);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Redis's own CPU while no subject loads it, µs per second, over `seconds`: what it spends on its
 * own (the active expiry of the keys earlier sections left, its cron) whoever is measured. A
 * subject's Redis CPU per request is taken less this (redisPerRequest), else a subject measured
 * after the 100,000 customers' minute counters were written pays for their expiry: the same key
 * read 11.7 µs of Redis per request in one subject and 66.2 in the next (2026-11-27).
 */
export async function redisIdleMicrosPerSecond(pid, seconds = 2) {
  const before = cpuMicros(pid);
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return (cpuMicros(pid) - before) / ((performance.now() - started) / 1000);
}

/** Redis CPU µs per request over a load of `n` requests that took `ms`: its delta less its idle rate. */
export function redisPerRequest(delta, idlePerSecond, ms, n) {
  return Math.max(0, delta - idlePerSecond * (ms / 1000)) / n;
}

/** CPU time (user + system) of a process in microseconds, from /proc (Linux). */
export function cpuMicros(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * An env value of `undefined` removes that variable from the child's environment. The child counts
 * the bytes its stdout gave (`stdoutBytes`). `stdoutFile`: stdout goes to that file instead of a
 * pipe, as with `node server.js > app.log` on a VM.
 */
export function start(name, command, argv, env = {}, { stdoutFile } = {}) {
  const fd = stdoutFile ? openSync(stdoutFile, 'a') : null;
  // METRICS_PORT=0: any free port, so subjects never collide with each other or a running `npm start`.
  const child = spawn(command, argv, {
    env: { ...process.env, METRICS_PORT: '0', ...env },
    stdio: ['ignore', fd ?? 'pipe', 'pipe'],
  });
  if (fd !== null) {
    closeSync(fd);
    Object.defineProperty(child, 'stdoutBytes', { get: () => statSync(stdoutFile).size });
  } else {
    child.stdoutBytes = 0;
    child.stdout.on('data', (d) => {
      child.stdoutBytes += d.length;
    });
  }
  child.on('error', (err) => {
    process.stderr.write(`bench: cannot start ${name} (${err.message})\n`);
    process.exit(2);
  });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  child.on('exit', (code, signal) => {
    if (!child.stopping)
      process.stderr.write(`bench: ${name} (pid ${child.pid}) exited ${code ?? signal}: ${stderr}\n`);
  });
  children.push(child);
  return child;
}

/** Resident memory of a process in bytes, from /proc (Linux). */
export function rssBytes(pid) {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : Number.NaN;
}

/** SIGTERM to every child, then up to 3 s for them to go; the exit hook kills what is left. */
export async function stopAll() {
  const exited = children
    .filter((c) => c.exitCode === null && c.signalCode === null)
    .map((c) => {
      c.stopping = true;
      const gone = new Promise((resolve) => c.once('exit', resolve));
      c.kill('SIGTERM');
      return gone;
    });
  await Promise.race([Promise.all(exited), new Promise((r) => setTimeout(r, 3000))]);
}

/**
 * Up to a minute: a gateway whose keys file holds 100k customers and 400k keys takes ~5 s to read
 * and check it on an idle host, and this one is shared. A child that fails to start says so as it exits.
 */
export async function waitFor(url, init) {
  for (let i = 0; i < 1200; i++) {
    try {
      if ((await fetch(url, init)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not ready: ${url}`);
}

/** A redis-server of the bench's own on a free port, or REDIS_URL if set (then no pid to measure). */
export async function startRedis() {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, pid: null };
  const port = await freePort();
  const child = start('redis-server', 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
  ]);
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => 50 });
  probe.on('error', () => {});
  await probe.connect().catch(() => {});
  for (let i = 0; i < 100 && probe.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 50));
  const ready = probe.status === 'ready';
  probe.disconnect();
  if (!ready) throw new Error(`redis-server did not accept connections on ${url}`);
  return { url, pid: child.pid };
}
