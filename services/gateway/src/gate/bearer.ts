const BEARER = /^Bearer +(\S+) *$/i;

/**
 * The token of an `Authorization: Bearer <token>` header (scheme in any case), or undefined when
 * the header is absent or not that shape. The public gate and the admin API read it alike.
 */
export function parseBearer(header: string | undefined): string | undefined {
  return header === undefined ? undefined : BEARER.exec(header)?.[1];
}

/**
 * RFC 6750 §3 challenges for a 401, as ApiError headers. Without credentials the challenge names
 * only the scheme and realm (§3.1: no error code for a client that did not try); a token that was
 * sent but is wrong, unknown or past its end gets error="invalid_token" and a description. Made
 * once: refusals reuse them instead of building a header per request.
 */
const REALM = 'animal-store';
type Challenge = Readonly<Record<string, string>>;

export const BEARER_CHALLENGE: Challenge = Object.freeze({ 'www-authenticate': `Bearer realm="${REALM}"` });

/** `description` goes inside a quoted-string: no `"` and no `\` (RFC 6750 §3 error_description). */
export function invalidTokenChallenge(description: string): Challenge {
  return Object.freeze({
    'www-authenticate': `Bearer realm="${REALM}", error="invalid_token", error_description="${description}"`,
  });
}

/** RFC 6750 §3.1: a known key without the scope a route needs. */
export function insufficientScopeChallenge(scope: string): Challenge {
  return Object.freeze({
    'www-authenticate': `Bearer realm="${REALM}", error="insufficient_scope", scope="${scope}"`,
  });
}
