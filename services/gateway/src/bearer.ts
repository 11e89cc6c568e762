const BEARER = /^Bearer +(\S+) *$/i;

/**
 * The token of an `Authorization: Bearer <token>` header (scheme in any case), or undefined when
 * the header is absent or not that shape. The public gate and the admin API read it alike.
 */
export function parseBearer(header: string | undefined): string | undefined {
  return header === undefined ? undefined : BEARER.exec(header)?.[1];
}
