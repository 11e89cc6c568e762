import { PET_ID_TEXT } from './schemas.js';

/** When the deprecation of GET /v1/pets/{petId} was announced (RFC 9745 Deprecation header). */
const GET_PET_DEPRECATED_AT = new Date('2026-01-01T00:00:00Z');
/** Removal date the spec gives: 5 December 2030 (RFC 8594 Sunset header). */
const GET_PET_SUNSET_AT = new Date('2030-12-05T00:00:00Z');

const DEPRECATION = `@${Math.floor(GET_PET_DEPRECATED_AT.getTime() / 1000)}`;
const SUNSET = GET_PET_SUNSET_AT.toUTCString();
const PET_ID = new RegExp(`^${PET_ID_TEXT}$`);

/**
 * Sent on every response of GET /v1/pets/{petId}, found or not, so any client that still calls
 * it learns about the deprecation, the removal date and the replacement: GET /v1/pets?id={petId}
 * (plain GET /v1/pets when the petId could not be an id).
 */
export function getPetDeprecationHeaders(petId: string | undefined) {
  const successor = petId !== undefined && PET_ID.test(petId) ? `/v1/pets?id=${petId}` : '/v1/pets';
  return {
    deprecation: DEPRECATION,
    sunset: SUNSET,
    link: `<${successor}>; rel="successor-version", </v1/openapi.json>; rel="deprecation"; type="application/json"`,
  };
}
