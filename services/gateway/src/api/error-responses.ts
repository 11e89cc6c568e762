import { ErrorSchema } from '@animal-store/common/error-schema.js';

// Apart from shared.ts, whose views the keys CLI uses: a schema there loads TypeBox's 373 modules
// into every CLI start.

/** The error statuses most routes answer, each in the Error shape. */
export const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 503: ErrorSchema };
/** A route that takes an Idempotency-Key: also 422 for a key reused with another body. */
export const idempotentErrors = { ...errors, 422: ErrorSchema };
