import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from './errors.js';

/** How much of a Content-Encoding value an answer quotes back. */
const QUOTED_CHARS = 40;

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
  const quoted = trimmed.length > QUOTED_CHARS ? `${trimmed.slice(0, QUOTED_CHARS)}…` : trimmed;
  return new ApiError(
    415,
    'unsupported_media_type',
    `Content-Encoding "${quoted}" is not supported: send the body uncompressed`,
  );
}
