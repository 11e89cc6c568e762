/** When the deprecation of GET /v1/pets/{petId} was announced (RFC 9745 Deprecation header). */
export const GET_PET_DEPRECATED_AT = new Date('2026-01-01T00:00:00Z');
/** Removal date the spec gives: 5 December 2030 (RFC 8594 Sunset header). */
export const GET_PET_SUNSET_AT = new Date('2030-12-05T00:00:00Z');

/**
 * Sent on every response of GET /v1/pets/{petId}, found or not, so any client that still calls
 * it learns about the deprecation, the removal date and the replacement (GET /v1/pets?status=).
 */
export const getPetDeprecationHeaders = {
  deprecation: `@${Math.floor(GET_PET_DEPRECATED_AT.getTime() / 1000)}`,
  sunset: GET_PET_SUNSET_AT.toUTCString(),
  link: '</v1/pets>; rel="successor-version", </v1/openapi.json>; rel="deprecation"; type="application/json"',
} as const;
