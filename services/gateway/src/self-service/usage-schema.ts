import { Type } from 'typebox';
import { perName } from '../limits/windows.js';

const Timestamp = Type.String({ format: 'date-time' });

const WindowSchema = Type.Object(
  {
    limit: Type.Integer({ minimum: 0, description: 'Units the window allows.' }),
    used: Type.Integer({ minimum: 0, description: 'Units taken in it so far.' }),
    remaining: Type.Integer({ minimum: 0, description: 'limit − used, never below 0.' }),
    resetAt: Type.Union([Timestamp, Type.Null()], {
      description:
        'When its count starts again (or starts to come back, for a sliding window); null while it holds nothing.',
    }),
  },
  { additionalProperties: false },
);

const WindowsSchema = Type.Object(
  perName(() => Type.Optional(WindowSchema)),
  {
    additionalProperties: false,
    description: 'Each window by name: second, minute, hour, day, month.',
  },
);

const PeriodSchema = Type.Object(
  {
    start: Timestamp,
    end: Timestamp,
    units: Type.Integer({ minimum: 0, description: 'Units of the requests served in it so far: what is billed.' }),
  },
  {
    additionalProperties: false,
    description:
      "The billing period holding now: the customer's (its anchor day, in its time zone), or the UTC calendar month for a key of no customer.",
  },
);

const CalendarSchema = Type.Object(
  {
    timeZone: Type.String({
      description:
        "The IANA zone the day and month windows count in: the customer's billing time zone, or UTC for a key of no customer.",
      examples: ['Asia/Kolkata'],
    }),
    anchorDay: Type.Integer({
      minimum: 1,
      maximum: 28,
      description: 'The day of the month the month window and billing period start on, at midnight in timeZone.',
    }),
    dayResetsAt: Timestamp,
    monthResetsAt: Timestamp,
  },
  {
    additionalProperties: false,
    description:
      "The calendar the key's day and month windows (and its customer's) count in, and when each next starts " +
      "again: the next midnight in timeZone, and the next anchorDay at midnight there. Set by the customer's " +
      'billing settings; a key of no customer has UTC and the 1st.',
  },
);

/** A credit balance: the customer's, or a key of no customer's own (`description` says whose). */
const creditsSchema = (description: string) =>
  Type.Object(
    {
      balance: Type.Integer({
        description: 'Credits left: each admitted request spends its cost from them; none left answers 402.',
      }),
      nextRefillAt: Type.Union([Timestamp, Type.Null()], {
        description: 'When the balance is next brought up to the refill amount; null when the terms have no refill.',
      }),
    },
    { additionalProperties: false, description },
  );

/**
 * What GET /v1/usage answers (and the portal's quotas page shows): the calling key's windows and
 * ban, its customer's shared windows, each one's units this billing period, and the credits the
 * key spends when terms are in force: its customer's, or a key of no customer's own. The answer is serialised by this schema: a field it does not
 * name is not sent.
 */
export const SelfUsageSchema = Type.Object({
  key: Type.Object({
    id: Type.String(),
    name: Type.String(),
    plan: Type.String(),
    windows: WindowsSchema,
    ban: Type.Union([Type.Object({ until: Timestamp }, { additionalProperties: false }), Type.Null()], {
      description: 'While the key is banned for ignoring 429s: when the ban ends.',
    }),
    calendar: CalendarSchema,
    billingPeriod: PeriodSchema,
    credits: Type.Optional(
      creditsSchema(
        "The key's own credit balance, for a key of no customer with credit terms in force (its own, else its " +
          "plan's); absent otherwise. A key of a customer spends its customer's balance (customer.credits).",
      ),
    ),
  }),
  customer: Type.Optional(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      plan: Type.String(),
      windows: Type.Object(
        perName(() => Type.Optional(WindowSchema)),
        {
          additionalProperties: false,
          description: 'The windows all the customer’s keys share, by name.',
        },
      ),
      billingPeriod: PeriodSchema,
      credits: Type.Optional(
        creditsSchema(
          "The customer's credit balance, which all its keys spend, when it has credit terms in force (its own, " +
            "else its plan's); absent otherwise.",
        ),
      ),
    }),
  ),
});
