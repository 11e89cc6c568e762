import { ApiError } from '@animal-store/common/errors.js';
import {
  MongoClientClosedError,
  MongoError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoOperationTimeoutError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
} from 'mongodb';

/**
 * Errors that mean "MongoDB cannot be reached right now" rather than "this request is wrong":
 * the client should retry later, and another replica may already be fine.
 */
export function isStoreUnreachable(err: unknown): boolean {
  return (
    err instanceof MongoServerSelectionError ||
    err instanceof MongoNetworkError ||
    err instanceof MongoTopologyClosedError ||
    err instanceof MongoNotConnectedError ||
    err instanceof MongoClientClosedError ||
    err instanceof MongoOperationTimeoutError ||
    // The driver does not export the class of a pool checkout timeout, only its name.
    (err instanceof MongoError && err.name === 'MongoWaitQueueTimeoutError')
  );
}

export function storeUnavailable(cause?: unknown): ApiError {
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
    throw isStoreUnreachable(err) ? storeUnavailable(err) : err;
  }
}
