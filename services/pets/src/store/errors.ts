import { ApiError } from '@animal-store/common/errors.js';
import { isMongoUnreachable } from '@animal-store/common/mongo-errors.js';

function storeUnavailable(cause?: unknown): ApiError {
  const error = new ApiError(503, 'upstream_unavailable', 'The pet store is unavailable; retry later');
  // Kept for the log line only; the client sees the message above.
  if (cause !== undefined) error.cause = cause;
  return error;
}

/** Runs a store operation, turning unreachable-database errors into a 503 the client can act on. */
export async function withStoreErrors<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw isMongoUnreachable(err) ? storeUnavailable(err) : err;
  }
}
