import { Ajv, type ErrorObject, type Options } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';
import { clipped } from './errors.js';
import { isPlainText, PLAIN_TEXT, PLAIN_TEXT_RULE } from './plain-text.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INTEGER_TEXT = /^-?(0|[1-9][0-9]*)$/;

type JsonSchema = {
  type?: string | string[];
  format?: string;
  description?: string;
  const?: unknown;
  properties?: Record<string, JsonSchema>;
};

function newAjv(options: Options): Ajv {
  // verbose: errors carry their schema, which the messages below need (allowed values, known
  // parameters, the description of a pattern).
  const ajv = new Ajv({ allErrors: false, strict: false, verbose: true, ...options });
  // OpenAPI integer formats: range is checked on the raw text below, Ajv only needs to know them.
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat(PLAIN_TEXT, { type: 'string', validate: isPlainText });
  return ajv;
}

function failure(instancePath: string, message: string): { error: Error & { validation: ErrorObject[] } } {
  const error = new Error(message) as Error & { validation: ErrorObject[] };
  // Its own keyword: validationMessage uses the message as it is.
  error.validation = [{ instancePath, message, keyword: 'text', schemaPath: '#', params: {} }];
  return { error };
}

/**
 * Bodies are validated without coercion ("5" is not 5); fields a schema closes to (additionalProperties:
 * false) are dropped rather than refused, or refused (400 naming the field) with `refuseUnknownFields`,
 * and open schemas keep them for the handler to ignore; query
 * strings and path params are coerced from text, but only from strict integer text, never twice
 * (a repeated parameter is an error, not an array) and never unknown (a typo is an error).
 * `shared`: the schemas route schemas refer to by $ref.
 */
export function createValidatorCompiler(
  shared: readonly object[] = [],
  options: { refuseUnknownFields?: boolean } = {},
): FastifySchemaCompiler<unknown> {
  const bodyAjv = newAjv({ coerceTypes: false, removeAdditional: !options.refuseUnknownFields, useDefaults: true });
  const textAjv = newAjv({ coerceTypes: true, removeAdditional: false, useDefaults: true });
  // Schemas with an $id that route schemas name by $ref; a custom compiler does not get the ones
  // given to app.addSchema.
  for (const schema of shared) {
    bodyAjv.addSchema(schema);
    textAjv.addSchema(schema);
  }

  return ({ schema, httpPart }) => {
    if (httpPart === 'body' || httpPart === undefined) {
      return bodyAjv.compile(schema as object);
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

/** How deeply a request body may nest arrays and objects. */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether JSON text nests arrays and objects deeper than `max`: one pass over the raw text
 * counting brackets outside strings, so a body nested thousands deep is refused before
 * JSON.parse spends time and stack on it. The text need not be valid JSON (the parse judges that).
 */
export function jsonNestingExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > max) return true;
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--;
  }
  return false;
}

const PLURAL_UNITS: Record<string, string> = { minLength: 'character', maxLength: 'character' };

function list(values: readonly unknown[]): string {
  return values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ');
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/**
 * What a failed schema check says: always the parameter or field (`body.name is required`,
 * `querystring.status must be one of: available, pending, sold`), never Ajv's wording about
 * "properties" and "schemas", and never the value that was sent; a name the client chose only
 * in a short prefix (clipped).
 */
export function validationMessage(where: string, errors: readonly ErrorObject[] | undefined): string {
  // A union of literals (say, plan) fails with an error per branch and then anyOf: the anyOf one
  // is the one to explain, unless a branch met a field it does not know (an object or null): that
  // field is what to fix.
  const error =
    errors?.find((e) => e.keyword === 'additionalProperties') ??
    errors?.find((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf') ??
    errors?.[0];
  // A path can hold names the client chose (a repeated query parameter): each quoted in part only.
  const at = `${where}${error?.instancePath ? error.instancePath.split('/').map(clipped).join('.') : ''}`;
  if (!error) return `${where} is invalid`;
  const params = error.params as Record<string, unknown>;
  const parent = (error.parentSchema ?? {}) as JsonSchema;
  switch (error.keyword) {
    case 'required':
      return `${at}.${String(params.missingProperty)} is required`;
    case 'additionalProperties': {
      const name = `${at}.${clipped(String(params.additionalProperty))}`;
      const known = Object.keys(parent.properties ?? {});
      const query = where === 'querystring' && !error.instancePath;
      const allowed =
        known.length > 0 ? `known: ${known.join(', ')}` : query ? 'this operation takes none' : 'none is allowed here';
      return `${name} is not a known ${query ? 'query parameter' : 'field'} (${allowed})`;
    }
    case 'enum':
      return `${at} must be one of: ${list(params.allowedValues as unknown[])}`;
    case 'const':
      return `${at} must be ${list([params.allowedValue])}`;
    case 'anyOf':
    case 'oneOf': {
      const branches = Array.isArray(error.schema) ? (error.schema as JsonSchema[]) : [];
      return branches.length > 0 && branches.every((b) => 'const' in b)
        ? `${at} must be one of: ${list(branches.map((b) => b.const))}`
        : `${at} does not have any of the allowed shapes`;
    }
    case 'type': {
      const types = String(params.type).split(',');
      return `${at} must be ${types.map(article).join(' or ')}`;
    }
    case 'minimum':
    case 'exclusiveMinimum':
    case 'maximum':
    case 'exclusiveMaximum': {
      const bound = String(params.limit);
      const word = {
        minimum: 'at least',
        exclusiveMinimum: 'more than',
        maximum: 'at most',
        exclusiveMaximum: 'less than',
      };
      return `${at} must be ${word[error.keyword]} ${bound}`;
    }
    case 'minLength':
    case 'maxLength':
    case 'minItems':
    case 'maxItems': {
      const n = Number(params.limit);
      const unit = PLURAL_UNITS[error.keyword] ?? 'item';
      const bound = error.keyword.startsWith('min') ? 'at least' : 'at most';
      return `${at} must have ${bound} ${n} ${unit}${n === 1 ? '' : 's'}`;
    }
    case 'pattern':
      return parent.description
        ? `${at} must be ${parent.description.replaceAll('`', '')}`
        : `${at} does not have the expected format`;
    case 'format':
      if (params.format === PLAIN_TEXT) return `${at} ${PLAIN_TEXT_RULE}`;
      return `${at} must be a valid ${String(params.format)}`;
    default:
      return `${at} ${error.message ?? 'is invalid'}`;
  }
}
