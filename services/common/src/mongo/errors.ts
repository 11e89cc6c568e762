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
import { redactUrl } from '../env.js';
import { StartupError } from '../serve.js';

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

/** What a MongoDB failure means for the request that met it, and the log line that says which. */
export interface MongoFailure {
  /** 503: retry later (the server is away, electing, out of time or short of members); 500: fix the deployment. */
  status: 503 | 500;
  kind: 'unreachable' | 'time_limit' | 'write_concern' | 'credentials';
  /** For the log, never for the client: which failure this was and what to look at. */
  reason: string;
}

// https://github.com/mongodb/mongo/blob/master/src/mongo/base/error_codes.yml
const UNAUTHORIZED = 13;
const AUTHENTICATION_FAILED = 18;
const MAX_TIME_MS_EXPIRED = 50;
/** WriteConcernFailed before 8.1, WriteConcernTimeout from 8.1: same code. */
const WRITE_CONCERN_FAILED = 64;
const UNSATISFIABLE_WRITE_CONCERN = 100;

function codeOf(err: unknown): number | undefined {
  return err instanceof MongoServerError && typeof err.code === 'number' ? err.code : undefined;
}

/**
 * The answer to a MongoDB failure, or undefined for one that is this request's own (a duplicate
 * key, a bad query) or a bug: those stay with the caller. Credentials come first: the driver can
 * label a failed handshake retryable, and retrying bad credentials never helps.
 */
export function mongoFailure(err: unknown): MongoFailure | undefined {
  const code = codeOf(err);
  if (code === AUTHENTICATION_FAILED) {
    return {
      status: 500,
      kind: 'credentials',
      reason:
        'MongoDB refused the credentials (code 18 AuthenticationFailed): check the user, password and authSource in MONGO_URL',
    };
  }
  if (code === UNAUTHORIZED) {
    return {
      status: 500,
      kind: 'credentials',
      reason:
        "MongoDB refused the operation (code 13 Unauthorized): MONGO_URL's user lacks the rights; grant it readWrite on the database",
    };
  }
  if (code === WRITE_CONCERN_FAILED) {
    return {
      status: 503,
      kind: 'write_concern',
      reason:
        'MongoDB did not confirm the write on a majority of members in time (code 64 WriteConcernFailed): the primary kept it and it may still replicate; check replication lag and members down',
    };
  }
  if (code === UNSATISFIABLE_WRITE_CONCERN) {
    return {
      status: 503,
      kind: 'write_concern',
      reason:
        'MongoDB cannot satisfy the write concern (code 100 UnsatisfiableWriteConcern): the replica set has too few data-bearing members for it',
    };
  }
  if (code === MAX_TIME_MS_EXPIRED) {
    return {
      status: 503,
      kind: 'time_limit',
      reason:
        'MongoDB stopped the operation at its maxTimeMS (code 50 MaxTimeMSExpired): the server is slow or a query lacks an index',
    };
  }
  if (isMongoUnreachable(err)) {
    const what = err instanceof Error ? err.message.split('\n')[0]?.slice(0, 200) : String(err);
    return { status: 503, kind: 'unreachable', reason: `MongoDB cannot be reached (${what})` };
  }
  return undefined;
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
