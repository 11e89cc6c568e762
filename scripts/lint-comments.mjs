// Fails on a comment that cites an issue number (the word issue, or a hash sign, before a number)
// or a Markdown document the repository does not hold: a comment says why, in words that stay true
// for a reader who has the code and nothing else. Reads the tracked files of services/, tests/
// and scripts/ (the console included); strings are not comments, so an error message or a test
// name may still say "issue".
//
// TypeScript and JavaScript comments are found by the TypeScript parser (a `//` inside a string or
// a regular expression is none); CSS and HTML comments by their delimiters; Dockerfiles and YAML
// by `#`. Prints file:line and the comment for each, and exits 1 when there is any.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
const FOLDERS = ['services', 'tests', 'scripts'];

const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
const documents = new Set(tracked.filter((file) => file.endsWith('.md')).map((file) => basename(file)));

/** The word issue (or issues), then a number, with or without a hash sign or "no." before it. */
const ISSUE_WORDS = /\bissues?\s+(?:no\.?\s*)?#?\d+/i;
/** A hash sign and a number alone: not a CSS colour, a URL's anchor or an HTML entity. */
const ISSUE_HASH = /(?<![\w&#/])#\d+(?![\w-])/;
const DOCUMENT = /[\w./-]*[\w-]+\.md\b/g;

/** What is wrong with one comment's text, or undefined. */
function problem(text, { colours }) {
  if (ISSUE_WORDS.test(text) || (!colours && ISSUE_HASH.test(text))) return 'cites an issue number';
  for (const [name] of text.matchAll(DOCUMENT)) {
    if (!documents.has(basename(name))) return `cites ${name}, which the repository does not hold`;
  }
  return undefined;
}

const SCRIPT = /\.(?:[cm]?[jt]s|tsx|jsx)$/;

/** Every comment of a script, with the line it starts on. */
function scriptComments(file, text) {
  const kind = file.endsWith('ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const seen = new Map();
  const collect = (ranges) => {
    for (const range of ranges ?? []) seen.set(range.pos, text.slice(range.pos, range.end));
  };
  const visit = (node) => {
    collect(ts.getLeadingCommentRanges(text, node.getFullStart()));
    collect(ts.getTrailingCommentRanges(text, node.getEnd()));
    for (const child of node.getChildren(source)) visit(child);
  };
  visit(source);
  return [...seen].map(([pos, comment]) => ({ line: source.getLineAndCharacterOfPosition(pos).line + 1, comment }));
}

/** Every comment between `open` and `close`, with the line it starts on. */
function delimitedComments(text, pattern) {
  return [...text.matchAll(pattern)].map((match) => ({
    line: text.slice(0, match.index).split('\n').length,
    comment: match[0],
  }));
}

function commentsOf(file, text) {
  if (SCRIPT.test(file)) return scriptComments(file, text);
  if (file.endsWith('.css')) return delimitedComments(text, /\/\*[\s\S]*?\*\//g);
  if (file.endsWith('.html') || file.endsWith('.svg')) return delimitedComments(text, /<!--[\s\S]*?-->/g);
  if (/(?:^|\/)Dockerfile$|\.ya?ml$|\.sh$/.test(file)) return delimitedComments(text, /(?<=^|\s)#.*$/gm);
  return [];
}

const found = [];
for (const file of tracked) {
  if (!FOLDERS.some((folder) => file.startsWith(`${folder}/`))) continue;
  const text = readFileSync(join(root, file), 'utf8');
  for (const { line, comment } of commentsOf(file, text)) {
    const why = problem(comment, { colours: file.endsWith('.css') });
    if (why) found.push(`${file}:${line}: ${why}: ${comment.split('\n')[0].trim()}`);
  }
}
if (found.length > 0) {
  console.error(`Comments that send the reader elsewhere (say why in the comment itself):\n${found.join('\n')}`);
  process.exit(1);
}
