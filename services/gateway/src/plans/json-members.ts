import { type Node, parseTree } from 'jsonc-parser';

/** A member's path as the plans file's messages write it: `plans.free`, `routeCosts["POST /v1/pets"]`, `[0].id`. */
function pathText(path: string[]): string {
  return path
    .map((name, i) => {
      if (/^[A-Za-z_][\w-]*$/.test(name)) return `${i === 0 ? '' : '.'}${name}`;
      return /^\d+$/.test(name) ? `[${name}]` : `[${JSON.stringify(name)}]`;
    })
    .join('');
}

/**
 * Each member name given twice in one object of a JSON text, as `path.name is given twice (lines
 * a and b)`: JSON.parse keeps the last without a word, so a second definition would silently
 * replace the first. The text is expected to be valid JSON already.
 */
export function repeatedMembers(text: string): string[] {
  const lineStarts = [0];
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const lineOf = (offset: number) => lineStarts.findLastIndex((start) => start <= offset) + 1;
  const found: string[] = [];
  const walk = (node: Node | undefined, path: string[]): void => {
    if (node?.type === 'array') {
      for (const [i, child] of (node.children ?? []).entries()) walk(child, [...path, String(i)]);
    }
    if (node?.type !== 'object') return;
    const firstLine = new Map<string, number>();
    for (const member of node.children ?? []) {
      const [name, value] = member.children ?? [];
      const key = String(name?.value);
      const line = lineOf(member.offset);
      const first = firstLine.get(key);
      if (first === undefined) firstLine.set(key, line);
      else found.push(`${pathText([...path, key])} is given twice (lines ${first} and ${line})`);
      walk(value, [...path, key]);
    }
  };
  walk(parseTree(text), []);
  return found;
}
