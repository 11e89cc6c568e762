import type { ErrorBody, ErrorCode } from '@animal-store/common/errors.js';

/**
 * What a client is told when the pets service cannot be reached or does not answer, by what went
 * wrong: the proxy's answers, the API reference's when it cannot get pets' document, and the
 * public document's examples of them.
 */
export const UPSTREAM_FAILURES = {
  timeout: { code: 'upstream_timeout', message: 'The pets service did not answer in time', status: 504 },
  refused: { code: 'upstream_unavailable', message: 'The pets service is unavailable', status: 503 },
  reset: { code: 'upstream_unavailable', message: 'The pets service closed the connection', status: 502 },
  other: { code: 'upstream_unavailable', message: 'The pets service sent no usable answer', status: 502 },
} as const satisfies Record<string, ErrorBody & { code: ErrorCode }>;

type UpstreamFailureKind = keyof typeof UPSTREAM_FAILURES;

/** The first error code along an error and its causes (a wrapped socket error keeps its own there). */
function errorCode(error: unknown): string | undefined {
  let current = error as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < 5; depth++) {
    // A DOMException's code is a number, and says nothing its name does not.
    if (typeof current.code === 'string') return current.code;
    current = current.cause as typeof current;
  }
  return undefined;
}

function failureKind(error: unknown): UpstreamFailureKind {
  const cause = errorCode(error);
  // TimeoutError: what fetch rejects with when its AbortSignal.timeout fires.
  if ((error as { name?: string } | undefined)?.name === 'TimeoutError') return 'timeout';
  if (cause === 'UND_ERR_HEADERS_TIMEOUT' || cause === 'UND_ERR_BODY_TIMEOUT' || cause === 'UND_ERR_CONNECT_TIMEOUT') {
    return 'timeout';
  }
  if (cause === 'ECONNREFUSED' || cause === 'ENOTFOUND' || cause === 'EAI_AGAIN') return 'refused';
  if (cause === 'ECONNRESET' || cause === 'UND_ERR_SOCKET' || cause === 'EPIPE') return 'reset';
  return 'other';
}

/** Maps what went wrong talking to the upstream onto the Error shape: never a 500 for the client. */
export function upstreamFailure(error: unknown): { kind: UpstreamFailureKind; body: ErrorBody } {
  const kind = failureKind(error);
  return { kind, body: UPSTREAM_FAILURES[kind] };
}
