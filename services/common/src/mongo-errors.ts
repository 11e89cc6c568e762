import {
  MongoClientClosedError,
  MongoError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoOperationTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
} from 'mongodb';
import { redactUrl } from './env.js';
import { StartupError } from './serve.js';

/**
 * Server answers that say "not now" rather than "never": an election in progress or a primary
 * stepping down (the driver labels these retryable), or an operation that ran out of time.
 */
const TRANSIENT_SERVER_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  89, // NetworkTimeout
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  50, // MaxTimeMSExpired
  9001, // SocketException
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

function isTransientServerError(err: unknown): boolean {
  if (!(err instanceof MongoServerError)) return false;
  return (
    err.hasErrorLabel('RetryableWriteError') ||
    err.hasErrorLabel('TransientTransactionError') ||
    (typeof err.code === 'number' && TRANSIENT_SERVER_CODES.has(err.code))
  );
}

/**
 * Errors that mean "MongoDB cannot be reached right now" rather than "this request is wrong":
 * the client should retry later, and another replica may already be fine. The pets store and
 * the gateway's key store answer them with a 503.
 */
export function isMongoUnreachable(err: unknown): boolean {
  return (
    isTransientServerError(err) ||
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

/**
 * MongoDB out of reach as a service starts (its indexes cannot be made), as one line naming
 * MONGO_URL, shown without its password, and what to do; anything else is not about the URL.
 */
export function mongoAtStart(err: unknown, url: string): unknown {
  if (!isMongoUnreachable(err)) return err;
  const reason = (err instanceof Error ? err.message : String(err)).split('\n')[0]?.slice(0, 200);
  return new StartupError(
    `MONGO_URL=${redactUrl(url)}: MongoDB cannot be reached (${reason}); start it, or set MONGO_URL to a server this machine reaches`,
  );
}
