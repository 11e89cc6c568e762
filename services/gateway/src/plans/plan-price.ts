/**
 * What a plan costs, in integer minor units of its currency (cents for EUR): `base` each billing
 * period, `includedUnits` units in it, then `unitPrice` for every `per` units beyond, the overage
 * rounded up to a whole `per`. Integers throughout: no floating point touches money.
 */
export interface PlanPrice {
  /** ISO 4217 code, three capital letters (EUR, USD, JPY). */
  currency: string;
  base: number;
  includedUnits: number;
  unitPrice: number;
  per: number;
}

const FIELDS = ['currency', 'base', 'includedUnits', 'unitPrice', 'per'] as const;
const AMOUNTS = ['base', 'includedUnits', 'unitPrice'] as const;

// The runtime's own list of ISO 4217 codes (ICU's), so a typo such as "EUO" is caught at start.
const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isCount = (value: unknown, least: number): value is number =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= least;

function currencyProblem(currency: unknown, at: string): string | null {
  if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency)) {
    return `${at}.currency must be an ISO 4217 code of three capital letters, such as "EUR"`;
  }
  if (!CURRENCIES.has(currency)) return `${at}.currency ${JSON.stringify(currency)} is not an ISO 4217 currency`;
  return null;
}

/**
 * A plan's `price` as PLANS_FILE writes it, checked; each problem is pushed naming its field
 * (`at` is the price's path, `plans.pro.price`), and undefined is returned when there is any.
 */
export function parsePrice(raw: unknown, at: string, problems: string[]): PlanPrice | undefined {
  if (!isObject(raw)) {
    problems.push(`${at} must be an object { ${FIELDS.join(', ')} }`);
    return undefined;
  }
  const before = problems.length;
  for (const field of Object.keys(raw)) {
    if (!(FIELDS as readonly string[]).includes(field)) {
      problems.push(`${at}: unknown field ${JSON.stringify(field.slice(0, 40))} (${FIELDS.join(', ')})`);
    }
  }
  const currency = currencyProblem(raw.currency, at);
  if (currency) problems.push(currency);
  for (const field of AMOUNTS) {
    if (!isCount(raw[field], 0)) {
      problems.push(`${at}.${field} must be a whole number from 0 (integer minor units or units, no fractions)`);
    }
  }
  if (!isCount(raw.per, 1)) problems.push(`${at}.per must be a whole number from 1`);
  if (problems.length > before) return undefined;
  return {
    currency: raw.currency as string,
    base: raw.base as number,
    includedUnits: raw.includedUnits as number,
    unitPrice: raw.unitPrice as number,
    per: raw.per as number,
  };
}
