import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { logDestination } from '../src/log-destination.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('logDestination', () => {
  it('returns from write at once, and flush calls back only once every line is written', async () => {
    dir = mkdtempSync(join(tmpdir(), 'log-destination-'));
    const file = join(dir, 'out.log');
    const fd = openSync(file, 'w');
    const destination = logDestination(fd);
    const lines = Array.from(
      { length: 20_000 },
      (_, i) => `${JSON.stringify({ i, msg: 'request', pad: 'x'.repeat(200) })}\n`,
    );
    for (const line of lines) destination.write(line);
    // Asynchronous: 4 MB handed over, not yet all on disk.
    expect(readFileSync(file, 'utf8').length).toBeLessThan(lines.join('').length);
    await new Promise<void>((resolve, reject) => destination.flush((err) => (err ? reject(err) : resolve())));
    const written = readFileSync(file, 'utf8');
    expect(written).toBe(lines.join(''));
    closeSync(fd);
  });

  it('calls back at once when nothing is pending', async () => {
    dir = mkdtempSync(join(tmpdir(), 'log-destination-'));
    const fd = openSync(join(dir, 'empty.log'), 'w');
    await new Promise<void>((resolve) => logDestination(fd).flush(() => resolve()));
    closeSync(fd);
  });
});

/** The compiled module, as a service process loads it (`npm test` builds first). */
const COMPILED = fileURLToPath(new URL('../dist/log-destination.js', import.meta.url));

/**
 * A script that writes `lines` lines of `bytes` bytes each through logDestination() on its stdout,
 * says so on stderr, then, once a line arrives on stdin, flushes and exits at once (process.exit
 * drops whatever is still held).
 */
function writerScript(lines: number, bytes: number): string {
  return `
    const { logDestination } = await import(${JSON.stringify(COMPILED)});
    const out = logDestination();
    const pad = 'x'.repeat(${bytes} - 30);
    for (let i = 0; i < ${lines}; i++) out.write(JSON.stringify({ i, pad }) + '\\n');
    process.stderr.write('written\\n');
    process.stdin.once('data', () => out.flush(() => process.exit(0)));
  `;
}

/** A script that logs three lines and exits without a flush, as a failed start does. */
const EXIT_WITHOUT_FLUSH = `
  const { logDestination } = await import(${JSON.stringify(COMPILED)});
  const out = logDestination();
  for (let i = 0; i < 3; i++) out.write(JSON.stringify({ i, msg: 'before exit' }) + '\\n');
  process.exit(1);
`;

/** A process whose stdout is a pipe, as under a container runtime or `npm start`: writerScript. */
function writer(lines: number, bytes: number) {
  return spawn(process.execPath, ['--input-type=module', '-e', writerScript(lines, bytes)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

async function readAll(child: ChildProcess): Promise<string[]> {
  const stdout = child.stdout;
  if (!stdout) throw new Error('the writer has no stdout pipe');
  let out = '';
  stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  stdout.resume();
  await once(child, 'exit');
  return out.split('\n').filter((l) => l !== '');
}

describe('logDestination on a pipe', () => {
  it('hands every line over in order, and flush calls back only once all are out', async () => {
    const child = writer(20_000, 200);
    await once(child.stderr, 'data');
    child.stdin.write('flush\n');
    const lines = await readAll(child);
    expect(lines).toHaveLength(20_000);
    expect(lines.map((l) => JSON.parse(l).i)).toEqual(Array.from({ length: 20_000 }, (_, i) => i));
  });

  it('writes out what it still gathers when the process exits without a flush (a failed start)', async () => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', EXIT_WITHOUT_FLUSH], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = await readAll(child);
    expect(lines.map((l) => JSON.parse(l).i)).toEqual([0, 1, 2]);
  });

  it('never blocks on a reader that stops; past 16 MiB queued it drops lines and reports how many', async () => {
    // 40 MiB while nothing reads: a blocking write would hang here before 'written'.
    const child = writer(10_000, 4096);
    child.stdout.pause();
    const said = await once(child.stderr, 'data');
    expect(String(said[0])).toBe('written\n');
    child.stdin.write('flush\n');
    const lines = await readAll(child);
    const last = JSON.parse(lines.at(-1) ?? '{}');
    expect(last).toMatchObject({
      level: 40,
      msg: expect.stringMatching(/^dropped \d+ log lines: stdout was not read fast enough$/),
    });
    const dropped = Number(/dropped (\d+)/.exec(last.msg)?.[1]);
    const kept = lines.slice(0, -1).map((l) => JSON.parse(l).i);
    // What was kept is a prefix, bounded by the queue limit; nothing is lost without being counted.
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, i) => i));
    expect(kept.length * 4096).toBeLessThan(17 * 1024 * 1024);
    expect(kept.length + dropped).toBe(10_000);
  });
});

describe('logDestination on a file (node server.js > app.log)', () => {
  /** Runs `script` with its stdout redirected to a new file; resolves with the file's lines at exit. */
  async function toFile(script: string, stdin?: (child: ChildProcess) => Promise<void>): Promise<string[]> {
    dir = mkdtempSync(join(tmpdir(), 'log-destination-'));
    const file = join(dir, 'app.log');
    const fd = openSync(file, 'w');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', fd, 'pipe'] });
    closeSync(fd);
    await stdin?.(child);
    await once(child, 'exit');
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
  }

  it('writes every line in order, and flush waits for all', async () => {
    const lines = await toFile(writerScript(20_000, 200), async (child) => {
      await once(child.stderr as NodeJS.ReadableStream, 'data');
      child.stdin?.write('flush\n');
    });
    expect(lines.map((l) => JSON.parse(l).i)).toEqual(Array.from({ length: 20_000 }, (_, i) => i));
  });

  it('writes out what it still gathers when the process exits without a flush (a failed start)', async () => {
    expect((await toFile(EXIT_WITHOUT_FLUSH)).map((l) => JSON.parse(l).i)).toEqual([0, 1, 2]);
  });
});
