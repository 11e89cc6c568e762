import type { IncomingHttpHeaders } from 'node:http';
import { ApiError, clipped } from './errors.js';

/**
 * The refusal (415) for a request body sent in a Content-Encoding other than identity, or
 * undefined. Neither service decodes bodies: a gzip body would otherwise fail as "not valid
 * JSON", and a plain one labelled br would pass as if the label were true.
 */
export function encodedBodyRefusal(headers: IncomingHttpHeaders): ApiError | undefined {
  const coding = headers['content-encoding'];
  if (coding === undefined) return undefined;
  const length = headers['content-length'];
  if ((length === undefined || length === '0') && headers['transfer-encoding'] === undefined) return undefined;
  const trimmed = coding.trim();
  if (trimmed === '' || trimmed.toLowerCase() === 'identity') return undefined;
  return new ApiError(
    415,
    'unsupported_media_type',
    `Content-Encoding "${clipped(trimmed)}" is not supported: send the body uncompressed`,
  );
}
