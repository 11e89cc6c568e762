import { type CreditTerms, creditTermsProblem, storedCreditTerms } from '../credits/credit-terms.js';
import { WINDOWS, windowNamed } from '../limits/windows.js';
import { PROXIED_ROUTES, routeName } from '../proxy/proxied-routes.js';
import { parseBillable } from './billable.js';
import { repeatedMembers } from './json-members.js';
import { parsePrice } from './plan-price.js';
import {
  ALGORITHMS,
  type Algorithm,
  type Limits,
  type PlanBook,
  type PlanDefinition,
  planProblem,
  SCOPES,
  type Scope,
  scopesProblem,
  WINDOW_NAMES,
} from './plans.js';

const PLAN_FIELDS = [
  'windows',
  'algorithm',
  'scopes',
  'shadow',
  'description',
  'maxKeys',
  'price',
  'credits',
  'billable',
];
const PLAN_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
const MAX_COST = 1_000_000;
const quoted = (text: string) => JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);

/** Plan fields as PLANS_FILE writes them: windows by name (`minute`), not by limit field. */
const WINDOW_NAMES_TEXT = WINDOW_NAMES.join(', ');

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parsePlan(name: string, raw: unknown, problems: string[]): PlanDefinition | undefined {
  const at = `plans.${name}`;
  if (!PLAN_NAME.test(name)) {
    problems.push(`plan name ${quoted(name)}: use 1 to 32 of a-z, 0-9, - and _, starting with a letter`);
    return undefined;
  }
  if (!isObject(raw)) {
    problems.push(`${at} must be an object { windows, algorithm, scopes, shadow }`);
    return undefined;
  }
  const before = problems.length;
  for (const field of Object.keys(raw)) {
    if (!PLAN_FIELDS.includes(field))
      problems.push(`${at}: unknown field ${quoted(field)} (${PLAN_FIELDS.join(', ')})`);
  }
  let windows: Limits | undefined;
  if (raw.windows !== undefined) {
    if (!isObject(raw.windows) || Object.keys(raw.windows).length === 0) {
      problems.push(`${at}.windows must be an object with a limit for any of ${WINDOW_NAMES_TEXT}`);
    } else {
      windows = {};
      for (const [window, limit] of Object.entries(raw.windows)) {
        const known = windowNamed(window);
        if (!known) {
          problems.push(`${at}.windows: unknown window ${quoted(window)} (${WINDOW_NAMES_TEXT})`);
          continue;
        }
        windows[known.field] = limit as number;
      }
    }
  }
  const algorithm = raw.algorithm ?? 'fixed';
  if (!(ALGORITHMS as readonly unknown[]).includes(algorithm)) {
    problems.push(`${at}.algorithm must be ${ALGORITHMS.join(' or ')}`);
  }
  const scopes = raw.scopes ?? [...SCOPES];
  const scopeProblem = scopesProblem(scopes, `${at}.scopes`);
  if (scopeProblem) problems.push(scopeProblem);
  if (raw.shadow !== undefined && typeof raw.shadow !== 'boolean') problems.push(`${at}.shadow must be true or false`);
  if (raw.description !== undefined && typeof raw.description !== 'string') {
    problems.push(`${at}.description must be a string`);
  }
  const maxKeys = raw.maxKeys;
  if (
    maxKeys !== undefined &&
    !(Number.isInteger(maxKeys) && (maxKeys as number) >= 1 && (maxKeys as number) <= 10_000)
  ) {
    problems.push(`${at}.maxKeys must be a whole number from 1 to 10000`);
  }
  const price = raw.price === undefined ? undefined : parsePrice(raw.price, `${at}.price`, problems);
  // The credit terms its customers and lone keys spend under unless their own say otherwise.
  const creditProblem = raw.credits === undefined ? undefined : creditTermsProblem(raw.credits, `${at}.credits`);
  if (creditProblem) problems.push(creditProblem);
  const billable = raw.billable === undefined ? undefined : parseBillable(raw.billable, `${at}.billable`, problems);
  if (problems.length > before) return undefined;
  const definition: PlanDefinition = {
    algorithm: algorithm as Algorithm,
    scopes: scopes as Scope[],
    shadow: raw.shadow === true,
    ...(windows ? { windows } : {}),
    ...(typeof raw.description === 'string' ? { description: raw.description } : {}),
    ...(typeof maxKeys === 'number' ? { maxKeys } : {}),
    ...(price ? { price } : {}),
    ...(raw.credits !== undefined ? { credits: storedCreditTerms(raw.credits as CreditTerms) } : {}),
    ...(billable ? { billable } : {}),
  };
  // The limits' own rules (integers, longer windows not below shorter ones), as keys obey them.
  if (windows) {
    const alone: PlanDefinition = { algorithm: definition.algorithm, scopes: definition.scopes, shadow: false };
    const single: PlanBook = { plans: new Map([[name, alone]]), routeCosts: new Map(), shadow: false, source: '' };
    const problem = planProblem(single, name, windows, {
      plan: `${at}`,
      limits: `${at}.windows`,
      field: (field) => `${at}.windows.${WINDOWS.find((w) => w.field === field)?.name}`,
    });
    if (problem) {
      problems.push(problem);
      return undefined;
    }
  }
  return definition;
}

function parseCosts(raw: unknown, plans: ReadonlyMap<string, PlanDefinition>, problems: string[]): Map<string, number> {
  const costs = new Map<string, number>();
  if (raw === undefined) return costs;
  if (!isObject(raw)) {
    problems.push('routeCosts must be an object such as { "POST /v1/pets": 5 }');
    return costs;
  }
  const routes = PROXIED_ROUTES.map((r) => routeName(r.method, r.url));
  for (const [route, cost] of Object.entries(raw)) {
    if (!routes.includes(route)) {
      problems.push(`routeCosts: no route ${quoted(route)}; the routes are ${routes.join(', ')}`);
      continue;
    }
    if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1 || cost > MAX_COST) {
      problems.push(`routeCosts[${quoted(route)}] must be an integer from 1 to ${MAX_COST}`);
      continue;
    }
    // A request that costs more than a window holds could never pass: say so now, not per 429.
    for (const [name, plan] of plans) {
      for (const window of WINDOWS) {
        const limit = plan.windows?.[window.field];
        if (limit !== undefined && cost > limit) {
          problems.push(
            `routeCosts[${quoted(route)}] is ${cost}, more than the ${name} plan's ${window.name} limit of ${limit}: its keys could never make that request`,
          );
        }
      }
    }
    costs.set(route, cost);
  }
  return costs;
}

/**
 * Parses PLANS_FILE's text into the plans in force. Every problem is listed, each naming where
 * it is, so one edit fixes them all.
 */
export function parsePlansFile(text: string, source: string, shadow: boolean): PlanBook | string[] {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    return [`${source} is not valid JSON (${(err as Error).message})`];
  }
  if (!isObject(data)) return [`${source} must hold a JSON object { "plans": { … }, "routeCosts": { … } }`];
  // A plan (or any field) written twice would be the last one alone, the first dropped unseen.
  const problems = repeatedMembers(text).map((p) => `${p}: give each once`);
  for (const field of Object.keys(data)) {
    if (field !== 'plans' && field !== 'routeCosts')
      problems.push(`unknown field ${quoted(field)} (plans, routeCosts)`);
  }
  const plans = new Map<string, PlanDefinition>();
  if (!isObject(data.plans) || Object.keys(data.plans).length === 0) {
    problems.push(
      'plans must be an object naming at least one plan, such as { "free": { "windows": { "minute": 60 } } }',
    );
  } else {
    for (const [name, raw] of Object.entries(data.plans)) {
      const plan = parsePlan(name, raw, problems);
      if (plan) plans.set(name, plan);
    }
  }
  const routeCosts = parseCosts(data.routeCosts, plans, problems);
  if (problems.length > 0) return problems.map((p) => `${source}: ${p}`);
  return { plans, routeCosts, shadow, source };
}
