import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
