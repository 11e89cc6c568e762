import { describe, expect, it } from 'vitest';
import { duplicateJsonKey } from '../src/json-body.js';

describe('duplicateJsonKey', () => {
  it.each([
    ['{"a":1,"a":2}', 'a'],
    ['{"a":1,"\\u0061":2}', 'a'],
    ['{"x":{"b":[1,{"c":1,"c":2}]}}', 'c'],
    ['[{"a":1},{"a":2,"b":{"a":3},"a":4}]', 'a'],
    ['{"":1,"":2}', ''],
  ])('%s → %j', (text, key) => {
    expect(duplicateJsonKey(text)).toBe(key);
  });

  it.each([
    '{"a":1,"b":2}',
    '{"a":{"a":1},"b":{"a":2}}',
    '[{"a":1},{"a":2}]',
    '{"a":"\\"a\\":1,\\"a\\":2","b":["a","a"]}',
    '{"a":"{\\"b\\":1}","b":1}',
    '"a"',
    '[]',
  ])('%s → null', (text) => {
    expect(duplicateJsonKey(text)).toBeNull();
  });
});
