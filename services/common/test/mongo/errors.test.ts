import { MongoServerError, MongoServerSelectionError, MongoWriteConcernError } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { mongoFailure } from '../../src/mongo/errors.js';

/*
 * What a MongoDB failure answers, from the driver's own error classes as the driver builds them
 * from a server's reply (codes: https://github.com/mongodb/mongo/blob/master/src/mongo/base/error_codes.yml).
 * A write concern error arrives as `ok: 1` with `writeConcernError` (the write happened on the
 * primary), which the driver raises as MongoWriteConcernError carrying the inner code.
 */

const server = (code: number, codeName: string) => new MongoServerError({ message: codeName, code, codeName });
const writeConcern = (code: number, codeName: string, errmsg: string) =>
  new MongoWriteConcernError({
    ok: 1,
    n: 1,
    writeConcernError: { code, codeName, errmsg, errInfo: { wtimeout: true } },
  });

describe('mongoFailure: what each MongoDB failure answers, and the log line that says which', () => {
  it.each([
    [
      'a majority that did not confirm in time',
      writeConcern(64, 'WriteConcernFailed', 'waiting for replication timed out'),
      503,
      'write_concern',
      /code 64 WriteConcernFailed/,
    ],
    [
      'a write concern the set cannot satisfy',
      writeConcern(100, 'UnsatisfiableWriteConcern', 'Not enough data-bearing nodes'),
      503,
      'write_concern',
      /code 100 UnsatisfiableWriteConcern/,
    ],
    ['a query stopped at its maxTimeMS', server(50, 'MaxTimeMSExpired'), 503, 'time_limit', /code 50 MaxTimeMSExpired/],
    [
      'credentials MongoDB refuses',
      server(18, 'AuthenticationFailed'),
      500,
      'credentials',
      /code 18 AuthenticationFailed.*MONGO_URL/,
    ],
    ['a user without the rights', server(13, 'Unauthorized'), 500, 'credentials', /code 13 Unauthorized.*rights/],
    ['a primary stepping down', server(189, 'PrimarySteppedDown'), 503, 'unreachable', /cannot be reached/],
    [
      'no server to select',
      new MongoServerSelectionError('connect ECONNREFUSED', { type: 'Unknown' } as never),
      503,
      'unreachable',
      /cannot be reached \(connect ECONNREFUSED\)/,
    ],
  ] as const)('%s: %s', (_label, err, status, kind, reason) => {
    const failure = mongoFailure(err);
    expect(failure).toMatchObject({ status, kind });
    expect(failure?.reason).toMatch(reason);
  });

  it('takes a handshake refused for its credentials as credentials, though the driver may label it retryable', () => {
    const err = new MongoServerError({
      message: 'Authentication failed.',
      code: 18,
      errorLabels: ['HandshakeError', 'RetryableWriteError'],
    });
    expect(mongoFailure(err)).toMatchObject({ status: 500, kind: 'credentials' });
  });

  it.each([
    ['a duplicate key', server(11000, 'DuplicateKey')],
    ['a bad query', server(2, 'BadValue')],
    ['a programming error', new TypeError('x is undefined')],
  ])('leaves %s to its caller', (_label, err) => {
    expect(mongoFailure(err)).toBeUndefined();
  });
});
