import { isMongoUnreachable } from '@animal-store/common/mongo/errors.js';
import { MongoServerError, MongoServerSelectionError, MongoWriteConcernError } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { withStoreErrors } from '../src/store/errors.js';

function serverError(code: number, labels: string[] = []): MongoServerError {
  const err = new MongoServerError({ message: `server said ${code}`, code, errorLabels: labels });
  return err;
}

describe('which MongoDB failures become 503 upstream_unavailable', () => {
  it.each([
    ['a primary stepping down', serverError(189)],
    ['a node that is no longer primary', serverError(10107)],
    ['an operation out of time', serverError(50)],
    ['a write the driver labels retryable', serverError(12345, ['RetryableWriteError'])],
    ['no server to select', new MongoServerSelectionError('no server', { type: 'Unknown' } as never)],
  ])('%s', async (_label, err) => {
    expect(isMongoUnreachable(err)).toBe(true);
    await expect(withStoreErrors(() => Promise.reject(err))).rejects.toMatchObject({
      statusCode: 503,
      code: 'upstream_unavailable',
    });
  });

  it.each([
    ['a duplicate key', serverError(11000)],
    ['a bad query', serverError(2)],
    ['a programming error', new TypeError('x is undefined')],
  ])('not %s, which stays a failure of its own', async (_label, err) => {
    expect(isMongoUnreachable(err)).toBe(false);
    await expect(withStoreErrors(() => Promise.reject(err))).rejects.toBe(err);
  });
});

describe('MongoDB failures that are not about reaching it', () => {
  const writeConcern = (code: number, codeName: string) =>
    new MongoWriteConcernError({ ok: 1, n: 1, writeConcernError: { code, codeName, errmsg: codeName } });

  it.each([
    ['a majority that did not confirm in time', writeConcern(64, 'WriteConcernFailed'), /code 64 WriteConcernFailed/],
    ['a write concern the set cannot satisfy', writeConcern(100, 'UnsatisfiableWriteConcern'), /code 100/],
    ['a list stopped at its maxTimeMS', serverError(50), /code 50 MaxTimeMSExpired/],
  ])('%s: 503 upstream_unavailable, and the log line says which', async (_label, err, line) => {
    const answer = withStoreErrors(() => Promise.reject(err));
    await expect(answer).rejects.toMatchObject({ statusCode: 503, code: 'upstream_unavailable', cause: err });
    await expect(answer).rejects.toMatchObject({ logLine: expect.stringMatching(line) });
  });

  it.each([
    ['credentials MongoDB refuses', serverError(18), /^pet store: .*code 18 AuthenticationFailed.*MONGO_URL/],
    ['a user without the rights', serverError(13), /^pet store: .*code 13 Unauthorized.*grant/],
  ])('%s: 500 internal_error (no retry helps), and the log line says what to fix', async (_label, err, line) => {
    const answer = withStoreErrors(() => Promise.reject(err));
    await expect(answer).rejects.toMatchObject({
      statusCode: 500,
      code: 'internal_error',
      message: 'Internal server error',
      logLine: expect.stringMatching(line),
    });
  });
});
