import { ApiError } from '@animal-store/common/errors.js';
import { mongoFailure } from '@animal-store/common/mongo/errors.js';
import { isRedisUnreachable } from '../redis/errors.js';

/** Seconds a client is told to wait when the limiter, the key store or an admin store is unavailable. */
export const UNAVAILABLE_RETRY_SECONDS = 5;

const RETRY_AFTER = { 'retry-after': String(UNAVAILABLE_RETRY_SECONDS) };

/**
 * The admin API's answer to an error that says a store cannot be reached, whichever route met it:
 * Redis (webhooks, the limiter, the usage history, idempotency records) stalled, down or failing
 * over, or the key store's MongoDB without a server to select. 503 with Retry-After, never a 500:
 * the request was fine and may succeed in a few seconds. The admin app's error handler asks this
 * of every error a route lets through (common/error-handler.ts), so no route needs a try/catch
 * of its own for it.
 */
export function storeUnavailable(err: Error): ApiError | undefined {
  if (isRedisUnreachable(err)) return unavailable('store_unavailable', 'Redis cannot be reached');
  const failure = mongoFailure(err);
  if (!failure) return undefined;
  // MongoDB's own failures, each with a log line saying which (mongoFailure): 503 for the ones a
  // retry can outlast (unreachable, an election, a query out of time, a write a majority did not
  // confirm in time), 500 for credentials or rights, which no retry fixes.
  const answer =
    failure.status === 500
      ? new ApiError(500, 'internal_error', 'Internal server error')
      : unavailable('store_unavailable', MONGO_MESSAGES[failure.kind]);
  answer.logLine = `key store: ${failure.reason}`;
  return answer;
}

/** What the client is told: enough to know a retry is right, nothing of the deployment. */
const MONGO_MESSAGES: Record<'unreachable' | 'time_limit' | 'write_concern' | 'credentials', string> = {
  unreachable: 'The key store (MongoDB) cannot be reached',
  time_limit: 'The key store (MongoDB) did not answer in time',
  write_concern: 'The key store (MongoDB) could not confirm the write on a majority of its members',
  credentials: 'Internal server error',
};

/** A 503 whose Retry-After says when to try again. */
export function unavailable(code: 'store_unavailable' | 'rate_limiter_unavailable', what: string): ApiError {
  return new ApiError(503, code, `${what}; retry in ${UNAVAILABLE_RETRY_SECONDS} s`, RETRY_AFTER);
}

/** The usage history could not be read: logged, and the request gets the 503. */
export function historyUnavailable(err: unknown, log: { error(obj: object, msg: string): void }): never {
  log.error({ err }, 'cannot read the usage history');
  throw unavailable('rate_limiter_unavailable', 'Cannot reach Redis to read the usage history');
}

/**
 * Bounds a call on a connection that waits for Redis instead of failing (the webhook queue's: it
 * must ride out a failover). A request waits at most `ms`, then gets the 503; the call may still
 * complete once Redis answers.
 */
export async function within<T>(ms: number, what: string, call: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(unavailable('store_unavailable', `${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}
