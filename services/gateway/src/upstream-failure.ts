import { type ErrorBody, errorBody } from '@animal-store/common/errors.js';

// What a client is told when the pets service cannot be reached or does not answer: the proxy's
// answers and the API description's examples of them.
export const PETS_TIMEOUT = 'The pets service did not answer in time';
export const PETS_UNAVAILABLE = 'The pets service is unavailable';
export const PETS_CLOSED = 'The pets service closed the connection';
export const PETS_NO_ANSWER = 'The pets service sent no usable answer';

/** The first error code along an error and its causes (a wrapped socket error keeps its own there). */
function errorCode(error: unknown): string | undefined {
  let current = error as { code?: string; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < 5; depth++) {
    if (current.code) return current.code;
    current = current.cause as typeof current;
  }
  return undefined;
}

/** Maps what went wrong talking to the upstream onto the Error shape: never a 500 for the client. */
export function upstreamFailure(error: unknown): { kind: string; body: ErrorBody } {
  const cause = errorCode(error);
  if (cause === 'UND_ERR_HEADERS_TIMEOUT' || cause === 'UND_ERR_BODY_TIMEOUT' || cause === 'UND_ERR_CONNECT_TIMEOUT') {
    return { kind: 'timeout', body: errorBody(504, 'upstream_timeout', PETS_TIMEOUT) };
  }
  if (cause === 'ECONNREFUSED' || cause === 'ENOTFOUND' || cause === 'EAI_AGAIN') {
    return { kind: 'refused', body: errorBody(503, 'upstream_unavailable', PETS_UNAVAILABLE) };
  }
  if (cause === 'ECONNRESET' || cause === 'UND_ERR_SOCKET' || cause === 'EPIPE') {
    return { kind: 'reset', body: errorBody(502, 'upstream_unavailable', PETS_CLOSED) };
  }
  return { kind: 'other', body: errorBody(502, 'upstream_unavailable', PETS_NO_ANSWER) };
}
