import { describe, expect, it } from 'vitest';
import { ConfigError, EnvReader, redactUrl } from '../src/env.js';

describe('redactUrl', () => {
  it('hides passwords and drops options, keeping user, hosts and path', () => {
    expect(redactUrl('mongodb://user:secret@h1:27017,h2:27017/pets?authSource=admin&replicaSet=rs0')).toBe(
      'mongodb://user:***@h1:27017,h2:27017/pets',
    );
    expect(redactUrl('mongodb+srv://u:p@cluster.example.net/?retryWrites=true')).toBe(
      'mongodb+srv://u:***@cluster.example.net/',
    );
    expect(redactUrl('redis://:secret@127.0.0.1:6379/0')).toBe('redis://:***@127.0.0.1:6379/0');
    expect(redactUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
    expect(redactUrl('not a url with secret')).not.toContain('secret');
  });
});

describe('EnvReader', () => {
  it('accepts multi-host MongoDB URLs and rejects wrong schemes and broken URLs, all at once', () => {
    const r = new EnvReader({
      A: 'mongodb://h1:27017,h2:27017/?replicaSet=rs0',
      B: 'http://db:27017',
      C: 'redis://bad host',
      D: 'x',
    });
    expect(r.url('A', ['mongodb:'])).toBe('mongodb://h1:27017,h2:27017/?replicaSet=rs0');
    r.url('B', ['mongodb:']);
    r.url('C', ['redis:']);
    expect(r.int('D', 1)).toBe(1);
    expect(r.problems).toHaveLength(3);
    expect(() => r.done()).toThrow(ConfigError);
  });

  it.each([
    ['host:port, no scheme', 'localhost:6379', 'REDIS_URL="localhost:6379" is not a URL: write redis://localhost:6379'],
    [
      'a password, no scheme',
      ':hunter2@cache.internal:6380/0',
      'REDIS_URL=":***@cache.internal:6380/0" is not a URL: write redis://:***@cache.internal:6380/0',
    ],
    [
      'another scheme',
      'http://user:hunter2@cache:6379?tls=1',
      'REDIS_URL="http://user:***@cache:6379?***" must start with redis:// or rediss://: write redis://user:***@cache:6379?***',
    ],
    [
      "a password with '/', '#' and '?' (what makes the URL invalid)",
      'redis://app:hun/ter2#x?y@cache:6379',
      'REDIS_URL="redis://app:***@cache:6379" is not a valid URL (a space, or a port that is not a number?)',
    ],
    [
      'a port that is not a number',
      'redis://cache:63a79',
      'REDIS_URL="redis://cache:63a79" is not a valid URL (a space, or a port that is not a number?)',
    ],
  ])(
    'a URL problem (%s) quotes the whole value, secrets hidden, and says how to write it',
    (_label, value, problem) => {
      const r = new EnvReader({ REDIS_URL: value });
      r.url('REDIS_URL', ['redis:', 'rediss:']);
      expect(r.problems).toEqual([problem]);
      expect(problem).not.toMatch(/hunter2|hun\/ter2|ter2/);
    },
  );

  it('reads strings with fallbacks, bounded integers and enumerations', () => {
    const r = new EnvReader({ S: '  x ', N: '42', BIG: '99', E: 'b', EMPTY: '' });
    expect(r.string('S')).toBe('x');
    expect(r.string('EMPTY', 'd')).toBe('d');
    expect(r.int('N', 0, 0, 50)).toBe(42);
    expect(r.int('BIG', 7, 0, 50)).toBe(7);
    expect(r.oneOf('E', ['a', 'b'] as const, 'a')).toBe('b');
    expect(r.problems).toEqual(['BIG must be an integer from 0 to 50, got "99"']);
  });
});
