import { describe, expect, it } from 'vitest';
import { BadCursorError, decodeCursor, encodeCursor, pageOf, startsWithPattern } from '../../src/paging/page.js';

describe('cursors', () => {
  it('come back as the position they were made from', () => {
    const position = { createdAt: '2026-11-26T10:00:00.000Z', id: 'cus_abc' };
    expect(decodeCursor(encodeCursor(position))).toEqual(position);
  });

  it.each([
    ['not base64url', 'a+b/c='],
    ['not JSON', Buffer.from('{').toString('base64url')],
    ['an object', Buffer.from('{"a":1}').toString('base64url')],
    ['three items', Buffer.from('["2026-11-26T10:00:00Z","x","y"]').toString('base64url')],
    ['a bad date', Buffer.from('["yesterday","x"]').toString('base64url')],
    ['a number id', Buffer.from('["2026-11-26T10:00:00Z",5]').toString('base64url')],
    ['too long', 'A'.repeat(201)],
    ['empty', ''],
  ])('refuses %s', (_case, cursor) => {
    expect(() => decodeCursor(cursor)).toThrow(BadCursorError);
  });
});

describe('pageOf', () => {
  const items = Array.from({ length: 5 }, (_, i) => ({ id: `k${i}`, createdAt: `2026-11-0${i + 1}T00:00:00.000Z` }));

  it('pages newest first and says when there is no more', () => {
    const first = pageOf(items, { limit: 2 });
    expect(first.items.map((i) => i.id)).toEqual(['k4', 'k3']);
    const second = pageOf(items, { limit: 2, after: first.next! });
    expect(second.items.map((i) => i.id)).toEqual(['k2', 'k1']);
    const last = pageOf(items, { limit: 2, after: second.next! });
    expect(last).toEqual({ items: [items[0]], next: null });
    expect(pageOf(items, { limit: 5 }).next).toBeNull();
  });
});

describe('startsWithPattern', () => {
  it.each([
    ['acme', 'acme corp', true],
    ['acme', 'the acme', false],
    ['a.c', 'a.c labs', true],
    ['a.c', 'abc', false],
    ['(x', '(x)', true],
    ['a*', 'aaa', false],
    ['[', '[1]', true],
    ['\\d', '\\d', true],
    ['\\d', '1', false],
  ])('%j matches %j: %s', (typed, text, matches) => {
    expect(new RegExp(startsWithPattern(typed)).test(text)).toBe(matches);
  });
});
