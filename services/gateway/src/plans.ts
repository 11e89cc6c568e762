export const PLANS = ['free', 'pro', 'business', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

export interface Limits {
  perMinute: number;
  perDay: number;
}

/** The spec's plan table; enterprise limits live on each key. */
export const PLAN_LIMITS: Record<Exclude<Plan, 'enterprise'>, Limits> = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
};

export function isPlan(value: unknown): value is Plan {
  return typeof value === 'string' && (PLANS as readonly string[]).includes(value);
}

export function limitsFor(plan: Plan, custom?: Limits): Limits {
  if (plan === 'enterprise') {
    if (!custom) throw new Error('enterprise keys carry their own limits');
    return custom;
  }
  return PLAN_LIMITS[plan];
}

/**
 * A key's limits after a change of plan or limits (admin API and keys file alike): the given
 * ones, else an enterprise key keeps its own; any other plan has none.
 */
export function limitsAfterChange(
  plan: Plan,
  given: Limits | undefined,
  current: Limits | undefined,
): Limits | undefined {
  return given ?? (plan === 'enterprise' ? current : undefined);
}

/** How a caller names the fields in its messages: JSON paths for the API, flags for the CLI. */
export interface LimitNames {
  plan: string;
  limits: string;
  perMinute: string;
  perDay: string;
}

const JSON_NAMES: LimitNames = {
  plan: 'plan',
  limits: 'limits { perMinute, perDay }',
  perMinute: 'limits.perMinute',
  perDay: 'limits.perDay',
};

/**
 * Why a plan/limits pair is unacceptable, or null when it is fine. Shared by the admin API, CLI
 * and keys file, each naming the fields as its users write them.
 */
export function planProblem(plan: unknown, limits: unknown, names: LimitNames = JSON_NAMES): string | null {
  if (!isPlan(plan)) return `${names.plan} must be one of ${PLANS.join(', ')}`;
  if (plan !== 'enterprise') {
    return limits === undefined
      ? null
      : `${names.limits} are fixed by the ${plan} plan; only enterprise keys take them`;
  }
  if (limits === undefined) return `enterprise keys need ${names.limits}`;
  // From a keys file limits can be anything JSON holds; null would throw below.
  if (typeof limits !== 'object' || limits === null) return `${names.limits} must be an object`;
  const l = limits as Partial<Limits>;
  for (const name of ['perMinute', 'perDay'] as const) {
    const n = l[name];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) return `${names[name]} must be a positive integer`;
  }
  if ((l.perMinute as number) > (l.perDay as number)) return `${names.perMinute} cannot exceed ${names.perDay}`;
  return null;
}
