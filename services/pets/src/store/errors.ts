import { ApiError } from '@animal-store/common/errors.js';
import { mongoFailure } from '@animal-store/common/mongo/errors.js';

/**
 * Runs a store operation, turning MongoDB's failures into answers the client can act on: 503
 * (retry later) for a server out of reach, out of time or short of members, 500 for credentials or
 * rights that are wrong. The log line (the error handler's, from logLine) says which; the client
 * sees neither the server's message nor the cause.
 */
export async function withStoreErrors<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    const failure = mongoFailure(err);
    if (!failure) throw err;
    const error =
      failure.status === 503
        ? new ApiError(503, 'upstream_unavailable', 'The pet store is unavailable; retry later')
        : new ApiError(500, 'internal_error', 'Internal server error');
    error.logLine = `pet store: ${failure.reason}`;
    // Kept for the log line only.
    error.cause = err;
    throw error;
  }
}
