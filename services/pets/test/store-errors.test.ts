import { isMongoUnreachable } from '@animal-store/common/mongo-errors.js';
import { MongoServerError, MongoServerSelectionError } from 'mongodb';
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
