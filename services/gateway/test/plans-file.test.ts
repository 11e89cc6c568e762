import { describe, expect, it } from 'vitest';
import { DEFAULT_PLANS, type PlanBook, planProblem, policyForKey, scopesProblem } from '../src/plans.js';
import { parsePlansFile } from '../src/plans-file.js';

// PLANS_FILE as the gateway reads it at start: the plans in force, or every problem, each naming
// where it is (policies.test.ts starts gateways on such files; this pins each message).

const SOURCE = 'PLANS_FILE=plans.json';

/** The problems a file has, without the source each starts with. */
function problems(content: unknown): string[] {
  const parsed = parsePlansFile(typeof content === 'string' ? content : JSON.stringify(content), SOURCE, false);
  if (!Array.isArray(parsed)) throw new Error('expected problems, got plans');
  for (const p of parsed) expect(p.startsWith(`${SOURCE}: `) || p.startsWith(`${SOURCE} `)).toBe(true);
  return parsed.map((p) => p.replace(`${SOURCE}: `, ''));
}

function book(content: unknown, shadow = false): PlanBook {
  const parsed = parsePlansFile(JSON.stringify(content), SOURCE, shadow);
  if (Array.isArray(parsed)) throw new Error(parsed.join('\n'));
  return parsed;
}

describe('a plans file that is read', () => {
  it('fills in what a plan leaves out: fixed windows, both scopes, not in shadow, no description', () => {
    const b = book({ plans: { free: { windows: { minute: 60, day: 1000 } } } });
    expect(b.source).toBe(SOURCE);
    expect(b.shadow).toBe(false);
    expect(b.routeCosts).toEqual(new Map());
    expect(b.plans.get('free')).toEqual({
      windows: { perMinute: 60, perDay: 1000 },
      algorithm: 'fixed',
      scopes: ['pets:read', 'pets:write'],
      shadow: false,
    });
  });

  it('keeps every field a plan sets, and the route costs', () => {
    const b = book(
      {
        plans: {
          reader: {
            windows: { second: 2, hour: 100, month: 1000 },
            algorithm: 'sliding',
            scopes: ['pets:read'],
            shadow: true,
            description: 'read only',
          },
          enterprise: { description: 'limits per key' },
        },
        routeCosts: { 'POST /v1/pets': 2 },
      },
      true,
    );
    expect(b.shadow).toBe(true);
    expect(b.routeCosts).toEqual(new Map([['POST /v1/pets', 2]]));
    expect(b.plans.get('reader')).toEqual({
      windows: { perSecond: 2, perHour: 100, perMonth: 1000 },
      algorithm: 'sliding',
      scopes: ['pets:read'],
      shadow: true,
      description: 'read only',
    });
    expect(b.plans.get('enterprise')).toEqual({
      algorithm: 'fixed',
      scopes: ['pets:read', 'pets:write'],
      shadow: false,
      description: 'limits per key',
    });
  });

  it('puts a shadow plan’s keys, or every key under RATE_LIMIT_SHADOW, in shadow mode with the plan’s algorithm', () => {
    const content = { plans: { trial: { windows: { minute: 5 }, shadow: true }, free: { windows: { minute: 5 } } } };
    expect(policyForKey(book(content), 'trial').shadow).toBe(true);
    expect(policyForKey(book(content), 'free').shadow).toBe(false);
    expect(policyForKey(book(content, true), 'free').shadow).toBe(true);
    const sliding = book({ plans: { s: { windows: { minute: 5 }, algorithm: 'sliding' } } });
    expect(policyForKey(sliding, 's').windows.map((w) => w.kind)).toEqual(['sliding']);
  });
});

describe('a plans file with problems', () => {
  it('says what is wrong with a file that is no plans object', () => {
    expect(problems('[1]')).toEqual([`${SOURCE} must hold a JSON object { "plans": { … }, "routeCosts": { … } }`]);
    expect(problems({ plans: {}, extra: 1 })).toEqual([
      'unknown field "extra" (plans, routeCosts)',
      'plans must be an object naming at least one plan, such as { "free": { "windows": { "minute": 60 } } }',
    ]);
    expect(problems({ plans: [] })).toEqual([
      'plans must be an object naming at least one plan, such as { "free": { "windows": { "minute": 60 } } }',
    ]);
  });

  it('names each bad plan field, shortening long names', () => {
    const long = `a${'b'.repeat(50)}`;
    expect(
      problems({
        plans: {
          [long]: {},
          empty: { windows: {} },
          list: [],
          odd: { windows: { minute: 5 }, limit: 3, shadow: 'yes', description: 7 },
        },
      }),
    ).toEqual([
      `plan name "a${'b'.repeat(39)}…": use 1 to 32 of a-z, 0-9, - and _, starting with a letter`,
      'plans.empty.windows must be an object with a limit for any of second, minute, hour, day, month',
      'plans.list must be an object { windows, algorithm, scopes, shadow }',
      'plans.odd: unknown field "limit" (windows, algorithm, scopes, shadow, description)',
      'plans.odd.shadow must be true or false',
      'plans.odd.description must be a string',
    ]);
  });

  it('checks a plan’s windows as a key’s limits are checked, naming the window', () => {
    expect(problems({ plans: { a: { windows: { minute: 100, hour: 50 } } } })).toEqual([
      'plans.a.windows.minute cannot exceed plans.a.windows.hour',
    ]);
    expect(problems({ plans: { a: { windows: { day: 0 } } } })).toEqual([
      'plans.a.windows.day must be an integer from 1 to 1000000000',
    ]);
    expect(problems({ plans: { a: { windows: { minute: 5 }, scopes: ['pets:read', 'pets:read'] } } })).toEqual([
      'plans.a.scopes names pets:read twice',
    ]);
  });

  it('refuses route costs that are not whole numbers from 1 to 1000000, or no object', () => {
    const plans = { free: { windows: { minute: 60 } } };
    for (const cost of [0, 1.5, '2', 1_000_001]) {
      expect(problems({ plans, routeCosts: { 'GET /v1/pets': cost } })).toEqual([
        'routeCosts["GET /v1/pets"] must be an integer from 1 to 1000000',
      ]);
    }
    expect(
      book({ plans: { free: { windows: { minute: 1_000_000 } } }, routeCosts: { 'GET /v1/pets': 1_000_000 } })
        .routeCosts,
    ).toEqual(new Map([['GET /v1/pets', 1_000_000]]));
    expect(problems({ plans, routeCosts: [] })).toEqual([
      'routeCosts must be an object such as { "POST /v1/pets": 5 }',
    ]);
    // A cost equal to a window's limit can still be paid once.
    expect(book({ plans, routeCosts: { 'GET /v1/pets/:petId': 60 } }).routeCosts.get('GET /v1/pets/:petId')).toBe(60);
  });
});

describe('plan and limits checks shared by the admin API, the CLI and the keys file', () => {
  it('says why a key’s plan and limits are refused', () => {
    expect(planProblem(DEFAULT_PLANS, 'gold', undefined)).toBe('plan must be one of free, pro, business, enterprise');
    expect(planProblem(DEFAULT_PLANS, 'enterprise', undefined)).toBe(
      'enterprise keys need limits { perSecond, perMinute, perHour, perDay, perMonth }',
    );
    expect(planProblem(DEFAULT_PLANS, 'free', undefined)).toBeNull();
    expect(planProblem(DEFAULT_PLANS, 'enterprise', null)).toBe(
      'limits { perSecond, perMinute, perHour, perDay, perMonth } must be an object',
    );
    expect(planProblem(DEFAULT_PLANS, 'enterprise', [])).toBe(
      'limits { perSecond, perMinute, perHour, perDay, perMonth } must be an object',
    );
    expect(planProblem(DEFAULT_PLANS, 'enterprise', { perWeek: 1 })).toBe(
      'limits { perSecond, perMinute, perHour, perDay, perMonth }: unknown field "perWeek"',
    );
    expect(planProblem(DEFAULT_PLANS, 'enterprise', { perMinute: 1_000_000_001 })).toBe(
      'limits.perMinute must be an integer from 1 to 1000000000',
    );
    expect(planProblem(DEFAULT_PLANS, 'enterprise', { perMinute: 1_000_000_000 })).toBeNull();
    expect(planProblem(DEFAULT_PLANS, 'enterprise', {})).toBe(
      'limits { perSecond, perMinute, perHour, perDay, perMonth } must set at least one window',
    );
    expect(planProblem(DEFAULT_PLANS, 'free', { perMinute: 2_000 })).toBe(
      'limits.perMinute cannot exceed limits.perDay',
    );
    expect(planProblem(DEFAULT_PLANS, 'free', { perMinute: 1_000 })).toBeNull();
  });

  it('says why a list of scopes is refused', () => {
    expect(scopesProblem('pets:read', 'scopes')).toBe('scopes must be a list of pets:read, pets:write');
    expect(scopesProblem([1], 'scopes')).toBe('scopes may hold only pets:read, pets:write');
    expect(scopesProblem(['pets:write', 'pets:read'], 'scopes')).toBeNull();
  });

  it('refuses to limit a key that nothing limits, saying why', () => {
    expect(() => policyForKey(DEFAULT_PLANS, 'enterprise')).toThrow(
      'keys of the enterprise plan carry their own limits, and this one has none',
    );
    expect(() => policyForKey(DEFAULT_PLANS, 'gold')).toThrow(
      `the key's plan gold is not in force (${DEFAULT_PLANS.source}): move it to one that is (keys update ID --plan P)`,
    );
    expect(policyForKey(DEFAULT_PLANS, 'gold', { perDay: 5 }).windows.map((w) => [w.name, w.limit])).toEqual([
      ['day', 5],
    ]);
  });
});
