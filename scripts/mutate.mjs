// `npm run mutate`: StrykerJS once per area of stryker.config.mjs (the rate limits and their policy,
// the API keys, the gate, key sync and the event bus, the usage history, webhooks and their address
// guard, customers, credits, metering, billing, the portal, GET /v1/usage), each run mutating only its area's code and running only its area's test files, one
// after the other; then one table of scores per file and the time each area took.
//
//   npm run mutate                          every area, incrementally (only what changed is retested)
//   npm run mutate -- gate                  one area (or several: keys sync)
//   npm run mutate -- --force               every mutant again, not only what changed
//   npm run mutate -- gate --mutate services/gateway/src/gate/refuse.ts --concurrency 1
//
// Arguments that are not area names go to `stryker run` as they are. Reports: reports/mutation/<area>/
// (index.html, mutation.json), and reports/mutation/summary.txt for the table printed at the end.
import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { startRedis } from '../bench/processes.mjs';
import { areas } from '../stryker.config.mjs';

const names = Object.keys(areas);
const args = process.argv.slice(2);
const firstOption = args.findIndex((arg) => arg.startsWith('-'));
const picked = firstOption < 0 ? args : args.slice(0, firstOption);
const strykerArgs = firstOption < 0 ? [] : args.slice(firstOption);
for (const name of picked) {
  if (!names.includes(name)) {
    process.stderr.write(`npm run mutate: no area "${name}" (areas: ${names.join(', ')})\n`);
    process.exit(2);
  }
}
const chosen = picked.length > 0 ? picked : names;
const stryker = join(
  dirname(createRequire(import.meta.url).resolve('@stryker-mutator/core/package.json')),
  'bin/stryker.js',
);

/**
 * One redis-server for the whole run, given to every test as REDIS_URL (tests/support/redis.ts
 * startRedis; callers namespace their keys): otherwise each test file that needs a Redis starts
 * its own, once per mutant that runs it. Tests that kill or restart a Redis start their own still.
 * A REDIS_URL already set is used as it is. The bench's own: it goes when this process exits,
 * however it exits.
 */
const redis = await startRedis();

/** Runs Stryker on one area; resolves with its exit code and wall time in seconds. */
function runArea(name) {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [stryker, 'run', ...strykerArgs], {
      stdio: 'inherit',
      env: { ...process.env, MUTATE_AREA: name, REDIS_URL: redis.url },
    });
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      resolve({ code: code ?? (signal ? 1 : 0), seconds: (performance.now() - started) / 1000 }),
    );
  });
}

const DETECTED = new Set(['Killed', 'Timeout']);
const SCORED = new Set(['Killed', 'Timeout', 'Survived', 'NoCoverage']);

/** Per-file counts from an area's mutation-testing-report-schema JSON. */
async function fileScores(name) {
  const report = JSON.parse(await readFile(`reports/mutation/${name}/mutation.json`, 'utf8'));
  return Object.entries(report.files).map(([path, file]) => {
    const count = (status) => file.mutants.filter((m) => m.status === status).length;
    const scored = file.mutants.filter((m) => SCORED.has(m.status)).length;
    const detected = file.mutants.filter((m) => DETECTED.has(m.status)).length;
    return {
      file: relative('services/gateway/src', relative(process.cwd(), path) || path),
      killed: count('Killed'),
      timeout: count('Timeout'),
      survived: count('Survived'),
      noCoverage: count('NoCoverage'),
      ignored: count('Ignored'),
      detected,
      scored,
    };
  });
}

const pct = (detected, scored) => (scored === 0 ? 'n/a' : `${((100 * detected) / scored).toFixed(1)} %`);
const mmss = (seconds) => `${Math.floor(seconds / 60)}:${String(Math.round(seconds % 60)).padStart(2, '0')}`;

const times = [];
let failed = false;
for (const name of chosen) {
  process.stdout.write(`\n== npm run mutate: area "${name}" ==\n`);
  const { code, seconds } = await runArea(name);
  times.push({ name, seconds, code });
  if (code !== 0) failed = true;
}

const rows = [];
for (const { name } of times) {
  try {
    for (const row of await fileScores(name)) rows.push({ area: name, ...row });
  } catch {
    // No report: that run failed before writing one; its exit code says so below.
  }
}
const head = ['area', 'file', 'score', 'killed', 'timeout', 'survived', 'no cov.', 'ignored'];
const total = rows.reduce((t, r) => ({ detected: t.detected + r.detected, scored: t.scored + r.scored }), {
  detected: 0,
  scored: 0,
});
const table = [
  head,
  ...rows.map((r) => [
    r.area,
    r.file,
    pct(r.detected, r.scored),
    r.killed,
    r.timeout,
    r.survived,
    r.noCoverage,
    r.ignored,
  ]),
  ['all', '', pct(total.detected, total.scored), '', '', '', '', ''],
].map((cells) => cells.map(String));
const widths = head.map((_, i) => Math.max(...table.map((cells) => cells[i].length)));
const lines = table.map((cells) =>
  cells
    .map((c, i) => c.padEnd(widths[i]))
    .join('  ')
    .trimEnd(),
);
lines.push(
  '',
  ...times.map(({ name, seconds, code }) => `${name}: ${mmss(seconds)}${code === 0 ? '' : ` (exit code ${code})`}`),
  `total: ${mmss(times.reduce((s, t) => s + t.seconds, 0))}`,
);
const summary = `${lines.join('\n')}\n`;
await mkdir('reports/mutation', { recursive: true });
await writeFile('reports/mutation/summary.txt', summary);
process.stdout.write(`\n${summary}`);
process.exit(failed ? 1 : 0);
