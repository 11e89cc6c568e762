import type { ErrorObject } from 'ajv';
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { createValidatorCompiler, validationMessage } from '../src/validation.js';

type Validate = (data: unknown) => { error?: Error & { validation?: ErrorObject[] } } | boolean;

/** The message a request part gets, through the same compiler and formatter the services use. */
function messageFor(httpPart: 'body' | 'querystring', schema: object, data: unknown): string {
  const compile = createValidatorCompiler() as unknown as (route: { schema: object; httpPart: string }) => Validate;
  const validate = compile({ schema, httpPart }) as Validate & { errors?: ErrorObject[] };
  const result = validate(data);
  const errors = typeof result === 'boolean' ? (result ? undefined : validate.errors) : result.error?.validation;
  if (!errors) throw new Error('expected a validation failure');
  return validationMessage(httpPart, errors);
}

const CreateKey = Type.Object(
  {
    plan: Type.Union(['free', 'pro', 'business', 'enterprise'].map((p) => Type.Literal(p))),
    limits: Type.Optional(
      Type.Object(
        { perMinute: Type.Integer({ minimum: 1 }), perDay: Type.Integer({ minimum: 1 }) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

describe('validationMessage', () => {
  it('lists the values of a union of literals', () => {
    expect(messageFor('body', CreateKey, { plan: 'gold' })).toBe(
      'body.plan must be one of: free, pro, business, enterprise',
    );
  });

  it('names nested fields by their full path', () => {
    expect(messageFor('body', CreateKey, { plan: 'enterprise', limits: { perMinute: 5 } })).toBe(
      'body.limits.perDay is required',
    );
    expect(messageFor('body', CreateKey, { plan: 'enterprise', limits: { perMinute: 0, perDay: 5 } })).toBe(
      'body.limits.perMinute must be at least 1',
    );
    expect(messageFor('body', CreateKey, { plan: 'enterprise', limits: 'lots' })).toBe('body.limits must be an object');
  });

  it('names an unknown query parameter and the known ones', () => {
    const query = Type.Object({ limit: Type.Optional(Type.Integer()) }, { additionalProperties: false });
    expect(messageFor('querystring', query, { limt: '5' })).toBe(
      'querystring.limt is not a known query parameter (known: limit)',
    );
  });

  it('says something sensible without any error detail', () => {
    expect(validationMessage('body', [])).toBe('body is invalid');
  });
});
