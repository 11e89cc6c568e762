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

  it.each([
    ['an IPv4 address', '10.0.0.7', true],
    ['every IPv4 address', '0.0.0.0', true],
    ['an IPv6 address', '::1', true],
    ['a host name', 'gateway.internal', true],
    ['localhost', 'localhost', true],
    ['numbers past 255', '300.1.1.1', false],
    ['three numbers', '10.0.7', false],
    ['an IPv6 address in brackets', '[::1]', false],
    ['a URL', 'http://0.0.0.0', false],
    ['a host and port', '127.0.0.1:8080', false],
    ['a label ending in a hyphen', 'gateway-.internal', false],
  ])('a listener address: %s (%s) is taken: %s', (_label, value, taken) => {
    const r = new EnvReader({ HOST: value });
    expect(r.host('HOST', '0.0.0.0')).toBe(value);
    expect(r.problems).toEqual(
      taken
        ? []
        : [
            `HOST must be an IP address or a host name (0.0.0.0: every address; 127.0.0.1: this machine only), got "${value}"`,
          ],
    );
  });

  it('refuses two listeners on one port unless they bind two different addresses; port 0 never clashes', () => {
    const r = new EnvReader({});
    r.distinctListeners([
      { portVariable: 'A_PORT', host: '0.0.0.0', port: 8080 },
      { portVariable: 'B_PORT', host: '127.0.0.1', port: 8080 },
      { portVariable: 'C_PORT', host: '127.0.0.1', port: 0 },
      { portVariable: 'D_PORT', host: '127.0.0.1', port: 0 },
      { portVariable: 'E_PORT', host: '127.0.0.1', port: 9000 },
      { portVariable: 'F_PORT', host: '10.0.0.7', port: 9000 },
      { portVariable: 'G_PORT', host: 'localhost', port: 9100 },
      { portVariable: 'H_PORT', host: '127.0.0.1', port: 9100 },
    ]);
    expect(r.problems).toEqual([
      'A_PORT and B_PORT are both 8080: give each listener its own port',
      'G_PORT and H_PORT are both 9100: give each listener its own port',
    ]);
  });
});
