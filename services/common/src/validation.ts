import { Ajv, type ErrorObject, type Options } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INTEGER_TEXT = /^-?(0|[1-9][0-9]*)$/;

type JsonSchema = {
  type?: string | string[];
  format?: string;
  properties?: Record<string, JsonSchema>;
};

function newAjv(options: Options): Ajv {
  const ajv = new Ajv({ allErrors: false, strict: false, ...options });
  // OpenAPI integer formats: range is checked on the raw text below, Ajv only needs to know them.
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => n >= -(2 ** 31) && n < 2 ** 31 });
  return ajv;
}

function failure(instancePath: string, message: string): { error: Error & { validation: ErrorObject[] } } {
  const error = new Error(message) as Error & { validation: ErrorObject[] };
  error.validation = [{ instancePath, message, keyword: 'type', schemaPath: '#', params: {} }];
  return { error };
}

/**
 * Bodies are validated without coercion ("5" is not 5) and unknown fields are dropped; query
 * strings and path params are coerced from text, but only from strict integer text, never twice
 * (a repeated parameter is an error, not an array) and never unknown (a typo is an error).
 */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodyAjv = newAjv({ coerceTypes: false, removeAdditional: true, useDefaults: true });
  const textAjv = newAjv({ coerceTypes: true, removeAdditional: false, useDefaults: true });

  return ({ schema, httpPart }) => {
    if (httpPart === 'body' || httpPart === undefined) {
      return bodyAjv.compile(schema as object);
    }
    if (httpPart === 'headers') {
      return newAjv({ coerceTypes: true, removeAdditional: false }).compile(schema as object);
    }
    const validate = textAjv.compile(schema as object);
    const props = (schema as JsonSchema).properties ?? {};
    const integerProps = Object.entries(props).filter(([, s]) => s.type === 'integer');
    return (data: unknown) => {
      const record = (data ?? {}) as Record<string, unknown>;
      for (const [name, value] of Object.entries(record)) {
        if (Array.isArray(value)) return failure(`/${name}`, 'must be given at most once');
      }
      for (const [name, prop] of integerProps) {
        const raw = record[name];
        if (raw === undefined || typeof raw !== 'string') continue;
        if (!INTEGER_TEXT.test(raw)) return failure(`/${name}`, 'must be an integer');
        if (prop.format === 'int64') {
          const big = BigInt(raw);
          if (big < INT64_MIN || big > INT64_MAX) return failure(`/${name}`, 'must be a 64-bit integer');
        }
      }
      if (validate(data)) return { value: data };
      return { error: Object.assign(new Error('validation failed'), { validation: validate.errors ?? [] }) };
    };
  };
}
