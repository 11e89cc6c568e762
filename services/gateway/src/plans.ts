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

/** Why a plan/limits pair is unacceptable, or null when it is fine. Shared by the admin API, CLI and keys file. */
export function planProblem(plan: unknown, limits: unknown): string | null {
  if (!isPlan(plan)) return `plan must be one of ${PLANS.join(', ')}`;
  if (plan !== 'enterprise') {
    return limits === undefined ? null : `limits are fixed by the ${plan} plan; only enterprise keys take limits`;
  }
  if (limits === undefined) return 'enterprise keys need limits { perMinute, perDay }';
  // From a keys file limits can be anything JSON holds; null would throw below.
  if (typeof limits !== 'object' || limits === null) return 'limits must be an object { perMinute, perDay }';
  const l = limits as Partial<Limits>;
  for (const name of ['perMinute', 'perDay'] as const) {
    const n = l[name];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) return `limits.${name} must be a positive integer`;
  }
  if ((l.perMinute as number) > (l.perDay as number)) return 'limits.perMinute cannot exceed limits.perDay';
  return null;
}
