import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PLANS,
  limitsAfterChange,
  limitsFor,
  maxKeysFor,
  type PlanBook,
  planProblem,
  policyForCustomer,
  policyForKey,
  scopesFor,
  scopesProblem,
} from '../../src/plans/plans.js';
import { parsePlansFile } from '../../src/plans/plans-file.js';

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
  it('takes a plan’s default credit terms (only their known fields), and lists bad ones with the other problems', () => {
    const b = book({
      plans: { metered: { windows: { minute: 60 }, credits: { refill: { amount: 500, every: 'period', note: 1 } } } },
    });
    expect(b.plans.get('metered')?.credits).toEqual({ refill: { amount: 500, every: 'period' } });
    expect(
      problems({
        plans: {
          a: { windows: { minute: 60 }, credits: { refill: { amount: 0, every: 'day' } } },
          b: { windows: { minute: 60 }, credits: { refill: { amount: 5, every: 'week' } } },
          c: { windows: { minute: 60 }, credits: { monthly: 5 } },
          d: { windows: { minute: 60 }, credits: null, shadow: 'yes' },
        },
      }),
    ).toEqual([
      'plans.a.credits.refill.amount must be a whole number from 1 to 1000000000000',
      "plans.b.credits.refill.every must be 'period' or 'day'",
      'plans.c.credits.monthly is not a field of credits (refill)',
      'plans.d.shadow must be true or false',
      'plans.d.credits must be an object',
    ]);
  });

  it('takes a plan’s maxKeys for the portal, 5 for a plan without one, and refuses one that is no whole number from 1 to 10000', () => {
    const b = book({ plans: { free: { windows: { minute: 60 }, maxKeys: 2 }, pro: { windows: { minute: 300 } } } });
    expect(b.plans.get('free')?.maxKeys).toBe(2);
    expect(maxKeysFor(b, 'free')).toBe(2);
    expect(maxKeysFor(b, 'pro')).toBe(5);
    expect(maxKeysFor(DEFAULT_PLANS, 'business')).toBe(5);
    for (const maxKeys of [0, 1.5, '3', 10_001]) {
      expect(problems({ plans: { free: { windows: { minute: 60 }, maxKeys } } })).toEqual([
        'plans.free.maxKeys must be a whole number from 1 to 10000',
      ]);
    }
  });

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
    expect(policyForKey(book(content), { plan: 'trial' }).shadow).toBe(true);
    expect(policyForKey(book(content), { plan: 'free' }).shadow).toBe(false);
    expect(policyForKey(book(content, true), { plan: 'free' }).shadow).toBe(true);
    const sliding = book({ plans: { s: { windows: { minute: 5 }, algorithm: 'sliding' } } });
    expect(policyForKey(sliding, { plan: 's' }).windows.map((w) => w.kind)).toEqual(['sliding']);
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
    for (const text of ['null', '5', '"plans"']) {
      expect(problems(text)).toEqual([`${SOURCE} must hold a JSON object { "plans": { … }, "routeCosts": { … } }`]);
    }
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
      'plans.odd: unknown field "limit" (windows, algorithm, scopes, shadow, description, maxKeys, price, credits, billable)',
      'plans.odd.shadow must be true or false',
      'plans.odd.description must be a string',
    ]);
    expect(problems({ plans: { a: null, b: 5, c: 'pro' } })).toEqual([
      'plans.a must be an object { windows, algorithm, scopes, shadow }',
      'plans.b must be an object { windows, algorithm, scopes, shadow }',
      'plans.c must be an object { windows, algorithm, scopes, shadow }',
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
    expect(book({ plans, routeCosts: { 'GET /v1/pets': 1 } }).routeCosts).toEqual(new Map([['GET /v1/pets', 1]]));
    expect(problems({ plans, routeCosts: [] })).toEqual([
      'routeCosts must be an object such as { "POST /v1/pets": 5 }',
    ]);
    // A cost equal to a window's limit can still be paid once.
    expect(book({ plans, routeCosts: { 'GET /v1/pets/:petId': 60 } }).routeCosts.get('GET /v1/pets/:petId')).toBe(60);
  });
});

describe('a plans file with problems, each named where it is', () => {
  it('says a file that is no JSON is not valid JSON, with the parser’s reason', () => {
    const [problem, ...rest] = problems('{"plans": ');
    expect(rest).toEqual([]);
    expect(problem).toMatch(/^PLANS_FILE=plans\.json is not valid JSON \(.+\)$/);
  });

  it('refuses a plan, a window or a route cost given twice, naming both lines', () => {
    const text = [
      '{',
      '  "plans": {',
      '    "free": { "windows": { "minute": 60, "day": 1000, "minute": 600 } },',
      '    "pro": { "windows": { "minute": 300 } },',
      '    "free": { "windows": { "minute": 6000 } }',
      '  },',
      '  "routeCosts": { "POST /v1/pets": 2, "POST /v1/pets": 3 }',
      '}',
    ].join('\n');
    expect(problems(text)).toEqual([
      'plans.free.windows.minute is given twice (lines 3 and 3): give each once',
      'plans.free is given twice (lines 3 and 5): give each once',
      'routeCosts["POST /v1/pets"] is given twice (lines 7 and 7): give each once',
    ]);
  });

  it('accepts plan names of 1 to 32 lower-case letters, digits, - and _, starting with a letter', () => {
    const plan = { windows: { minute: 1 } };
    const names = ['a', `a${'b'.repeat(31)}`, 'pro-2_x'];
    expect([...book({ plans: Object.fromEntries(names.map((n) => [n, plan])) }).plans.keys()]).toEqual(names);
    for (const name of [`a${'b'.repeat(32)}`, '2pro', 'Pro', '-pro', 'pro plan']) {
      expect(problems({ plans: { [name]: plan } })).toEqual([
        `plan name ${JSON.stringify(name)}: use 1 to 32 of a-z, 0-9, - and _, starting with a letter`,
      ]);
    }
  });

  it('quotes names of up to 40 characters whole', () => {
    const forty = `a${'b'.repeat(39)}`;
    expect(problems({ plans: { [forty]: {} } })).toEqual([
      `plan name "${forty}": use 1 to 32 of a-z, 0-9, - and _, starting with a letter`,
    ]);
  });

  it('names an unknown window, a bad algorithm and bad scopes of a plan, all at once', () => {
    expect(
      problems({
        plans: {
          a: { windows: { minute: 5, week: 9 }, algorithm: 'leaky', scopes: ['pets:delete'] },
          b: { windows: [] },
          c: { windows: { minute: 5 }, scopes: 'pets:read' },
        },
      }),
    ).toEqual([
      'plans.a.windows: unknown window "week" (second, minute, hour, day, month)',
      'plans.a.algorithm must be fixed or sliding',
      'plans.a.scopes may hold only pets:read, pets:write',
      'plans.b.windows must be an object with a limit for any of second, minute, hour, day, month',
      'plans.c.scopes must be a list of pets:read, pets:write',
    ]);
  });

  it('keeps no plan with a problem, and reports the others’ problems too', () => {
    expect(
      problems({
        plans: { good: { windows: { minute: 5 } }, bad: { windows: { hour: 1, day: 'x' } } },
        routeCosts: { 'GET /v1/pets': 2, 'DELETE /v1/pets': 1 },
      }),
    ).toEqual([
      'plans.bad.windows.day must be an integer from 1 to 1000000000',
      'routeCosts: no route "DELETE /v1/pets"; the routes are GET /v1/pets, POST /v1/pets, GET /v1/pets/:petId',
    ]);
  });

  it('checks route costs only against the plans it keeps', () => {
    expect(
      problems({ plans: { bad: { windows: { minute: 2 }, shadow: 'yes' } }, routeCosts: { 'GET /v1/pets': 5 } }),
    ).toEqual(['plans.bad.shadow must be true or false']);
  });

  it('refuses a route cost above any window of any plan, naming the plan and window', () => {
    expect(
      problems({
        plans: { free: { windows: { second: 2, minute: 60 } }, pro: { windows: { minute: 300 } }, ent: {} },
        routeCosts: { 'POST /v1/pets': 3 },
      }),
    ).toEqual([
      'routeCosts["POST /v1/pets"] is 3, more than the free plan\'s second limit of 2: its keys could never make that request',
    ]);
  });

  it('keeps an explicit fixed algorithm and an empty description', () => {
    expect(
      book({ plans: { s: { windows: { hour: 9 }, algorithm: 'fixed', description: '' } } }).plans.get('s'),
    ).toEqual({
      windows: { perHour: 9 },
      algorithm: 'fixed',
      scopes: ['pets:read', 'pets:write'],
      shadow: false,
      description: '',
    });
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

  it('takes every limit from 1 to 1000000000 and nothing else: no fractions, no text, no zero', () => {
    for (const n of [1, 1_000_000_000]) expect(planProblem(DEFAULT_PLANS, 'enterprise', { perHour: n })).toBeNull();
    for (const n of [0, -1, 1.5, '5', null, 1_000_000_001, Number.MAX_SAFE_INTEGER + 1]) {
      expect(planProblem(DEFAULT_PLANS, 'enterprise', { perHour: n })).toBe(
        'limits.perHour must be an integer from 1 to 1000000000',
      );
    }
  });

  it('lets a longer window allow as much as a shorter one, never less, whichever windows are set', () => {
    expect(planProblem(DEFAULT_PLANS, 'enterprise', { perSecond: 10, perMinute: 10, perMonth: 10 })).toBeNull();
    expect(planProblem(DEFAULT_PLANS, 'enterprise', { perSecond: 10, perDay: 9 })).toBe(
      'limits.perSecond cannot exceed limits.perDay',
    );
    expect(planProblem(DEFAULT_PLANS, 'enterprise', { perSecond: 1, perMinute: 10, perHour: 5 })).toBe(
      'limits.perMinute cannot exceed limits.perHour',
    );
    // A key's own limits are checked against its plan's other windows (free: 1000 a day).
    expect(planProblem(DEFAULT_PLANS, 'free', { perMonth: 999 })).toBe('limits.perDay cannot exceed limits.perMonth');
  });

  it('names fields as the caller’s users write them', () => {
    const flags = { plan: '--plan', limits: '--per-*', field: (f: string) => `--${f}` };
    expect(planProblem(DEFAULT_PLANS, 'gold', undefined, flags)).toBe(
      '--plan must be one of free, pro, business, enterprise',
    );
    expect(planProblem(DEFAULT_PLANS, 'free', { perMinute: 5_000 }, flags)).toBe('--perMinute cannot exceed --perDay');
    expect(planProblem(DEFAULT_PLANS, 'free', 'x', flags)).toBe('--per-* must be an object');
  });

  it('quotes an unknown limit field, shortened past 40 characters', () => {
    const long = 'x'.repeat(45);
    expect(planProblem(DEFAULT_PLANS, 'enterprise', { [long]: 1 })).toBe(
      `limits { perSecond, perMinute, perHour, perDay, perMonth }: unknown field "${'x'.repeat(40)}"`,
    );
  });

  it('says why a list of scopes is refused', () => {
    expect(scopesProblem('pets:read', 'scopes')).toBe('scopes must be a list of pets:read, pets:write');
    expect(scopesProblem([1], 'scopes')).toBe('scopes may hold only pets:read, pets:write');
    expect(scopesProblem(['pets:write', 'pets:read'], 'scopes')).toBeNull();
    expect(scopesProblem([], 'scopes')).toBeNull();
    expect(scopesProblem(['pets:write', 'pets:write'], 'scopes')).toBe('scopes names pets:write twice');
    expect(scopesProblem(['pets:admin'], 'key.scopes')).toBe('key.scopes may hold only pets:read, pets:write');
  });

  it('refuses to limit a key that nothing limits, saying why', () => {
    expect(() => policyForKey(DEFAULT_PLANS, { plan: 'enterprise' })).toThrow(
      'keys of the enterprise plan carry their own limits, and this one has none',
    );
    expect(() => policyForKey(DEFAULT_PLANS, { plan: 'gold' })).toThrow(
      `the key's plan gold is not in force (${DEFAULT_PLANS.source}): move it to one that is (keys update ID --plan P)`,
    );
    expect(
      policyForKey(DEFAULT_PLANS, { plan: 'gold', limits: { perDay: 5 } }).windows.map((w) => [w.name, w.limit]),
    ).toEqual([['day', 5]]);
  });

  it('limits a key of a customer by the customer’s terms, not the key’s plan, and says why when nothing does', () => {
    const customer = { plan: 'gold', billing: { anchorDay: 15, timeZone: 'Europe/Paris' } };
    // The key's own plan (free, 60 a minute) is not what limits it: its customer's is.
    expect(() => policyForKey(DEFAULT_PLANS, { plan: 'free' }, customer)).toThrow(
      `the customer's plan gold is not in force (${DEFAULT_PLANS.source}): move the customer to one that is`,
    );
    expect(() => policyForKey(DEFAULT_PLANS, { plan: 'free' }, { ...customer, plan: 'enterprise' })).toThrow(
      "customer's enterprise plan has no windows, and neither the customer nor the key has limits of its own",
    );
    const own = policyForKey(DEFAULT_PLANS, { plan: 'free', limits: { perDay: 5 } }, customer);
    expect(own.windows.map((w) => [w.name, w.limit, w.scope])).toEqual([['day', 5, 'key']]);
    const shared = policyForKey(
      DEFAULT_PLANS,
      { plan: 'free', limits: { perMinute: 7 } },
      { ...customer, plan: 'pro' },
    );
    expect(shared.windows.map((w) => [w.name, w.scope])).toEqual(
      policyForCustomer(DEFAULT_PLANS, { ...customer, plan: 'pro' }).windows.flatMap((w) =>
        w.name === 'minute'
          ? [
              ['minute', 'key'],
              [w.name, w.scope],
            ]
          : [[w.name, w.scope]],
      ),
    );
    expect(shared.windows.filter((w) => w.scope === 'customer').length).toBeGreaterThan(0);
  });
});

describe('a key’s limits and scopes from its plan and its own', () => {
  const plans: PlanBook = book({
    plans: {
      free: { windows: { minute: 60, day: 1_000 }, scopes: ['pets:read'] },
      slide: { windows: { minute: 10 }, algorithm: 'sliding', shadow: true },
      enterprise: {},
    },
  });

  it('are the plan’s windows with the key’s own over them', () => {
    expect(limitsFor(plans, 'free')).toEqual({ perMinute: 60, perDay: 1_000 });
    expect(limitsFor(plans, 'free', { perDay: 5_000 })).toEqual({ perMinute: 60, perDay: 5_000 });
    expect(limitsFor(plans, 'enterprise', { perHour: 7 })).toEqual({ perHour: 7 });
    expect(limitsFor(plans, 'enterprise')).toEqual({});
    expect(limitsFor(plans, 'gone', { perHour: 7 })).toEqual({ perHour: 7 });
    expect(limitsFor(plans, 'gone')).toEqual({});
  });

  it('are limited as the plan counts: its algorithm and its shadow mode', () => {
    const policy = policyForKey(plans, { plan: 'slide', limits: { perMinute: 20 } });
    expect(policy.windows.map((w) => [w.name, w.limit, w.kind])).toEqual([['minute', 20, 'sliding']]);
    expect(policy.shadow).toBe(true);
    expect(policyForKey(plans, { plan: 'free' }).shadow).toBe(false);
    const orphan = policyForKey(plans, { plan: 'gone', limits: { perHour: 7 } });
    expect(orphan.windows.map((w) => w.kind)).toEqual(['fixed']);
    expect(orphan.shadow).toBe(false);
  });

  it('have the key’s own scopes, else the plan’s, else both', () => {
    expect(scopesFor(plans, 'free')).toEqual(['pets:read']);
    expect(scopesFor(plans, 'free', ['pets:write'])).toEqual(['pets:write']);
    expect(scopesFor(plans, 'gone')).toEqual(['pets:read', 'pets:write']);
  });

  it('after a change: the limits given, else the key’s own unless it moves to another plan with windows', () => {
    expect(limitsAfterChange(plans, 'free', 'free', { perMinute: 5 }, { perMinute: 9 })).toEqual({ perMinute: 5 });
    expect(limitsAfterChange(plans, 'free', 'free', undefined, { perMinute: 9 })).toEqual({ perMinute: 9 });
    expect(limitsAfterChange(plans, 'enterprise', 'free', undefined, { perMinute: 9 })).toBeUndefined();
    expect(limitsAfterChange(plans, 'free', 'enterprise', undefined, { perMinute: 9 })).toEqual({ perMinute: 9 });
    expect(limitsAfterChange(plans, 'free', 'gone', undefined, { perMinute: 9 })).toEqual({ perMinute: 9 });
  });
});
