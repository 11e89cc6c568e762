// Fails on a commit whose subject is longer than 72 characters or is not followed by a blank
// line: `git log --oneline`, GitHub's lists and `git shortlog` cut or wrap past that, and the
// why belongs in the body. Checks the commits after a base: the first argument, else
// COMMITS_BASE, else FIRST_CHECKED (the last commit before the rule; older subjects stay as they
// were written). A clone without the base (a shallow one) checks what it has and says so.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const FIRST_CHECKED = 'faf21443a8a57960e96c1e22c137f75c2a3a64c4';
const MAX_SUBJECT = 72;

const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8' });
const has = (rev) => {
  try {
    git('cat-file', '-e', `${rev}^{commit}`);
    return true;
  } catch {
    return false;
  }
};

const base = process.argv[2] ?? process.env.COMMITS_BASE ?? FIRST_CHECKED;
const range = has(base) ? `${base}..HEAD` : 'HEAD';
if (!has(base)) console.warn(`lint-commits: ${base} is not in this clone; checking every commit it has`);

/** What is wrong with one commit message, or undefined. */
function problem(message) {
  const [subject = '', second] = message.split('\n');
  if (subject.trim() === '') return 'has an empty subject';
  if (subject.length > MAX_SUBJECT) return `subject is ${subject.length} characters (at most ${MAX_SUBJECT})`;
  if (second !== undefined && second.trim() !== '') return 'has no blank line after its subject';
  return undefined;
}

const records = git('log', '--no-merges', '--format=%H%x00%B%x1e', range)
  .split('\x1e')
  .map((record) => record.replace(/^\n/, ''))
  .filter(Boolean);
let bad = 0;
for (const record of records) {
  const [hash, message] = record.split('\0');
  const why = problem(message.trimEnd());
  if (why) {
    bad += 1;
    console.error(`${hash.slice(0, 10)} ${why}: ${message.split('\n')[0]}`);
  }
}
if (bad > 0) {
  console.error(`lint-commits: ${bad} of ${records.length} commits break the subject rule (docs/development.md)`);
  process.exit(1);
}
