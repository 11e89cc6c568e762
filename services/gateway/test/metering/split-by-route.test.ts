import { describe, expect, it } from 'vitest';
import { splitByRoute, UNATTRIBUTED_ROUTE } from '../../src/metering/closer.js';

/* The routes of a closed hour always sum to the history's units, whatever the route counts say. */

const sum = (routes: Record<string, number>) => Object.values(routes).reduce((a, b) => a + b, 0);

describe('splitByRoute', () => {
  it('gives the routes as counted when they sum to the units', () => {
    expect(splitByRoute(13, { 'GET /v1/pets': 3, 'POST /v1/pets': 10 })).toEqual({
      'GET /v1/pets': 3,
      'POST /v1/pets': 10,
    });
  });

  it('names what the routes fall short of as unattributed (a request not answered yet, a lost batch)', () => {
    expect(splitByRoute(8, { 'GET /v1/pets': 3 })).toEqual({ 'GET /v1/pets': 3, [UNATTRIBUTED_ROUTE]: 5 });
    expect(splitByRoute(4, {})).toEqual({ [UNATTRIBUTED_ROUTE]: 4 });
  });

  it('takes an excess off the smallest routes first, and never leaves a route at 0 or the sum off', () => {
    const routes = splitByRoute(8, { 'GET /v1/pets': 3, 'POST /v1/pets': 10, 'GET /v1/pets/:petId': 0 });
    expect(routes).toEqual({ 'POST /v1/pets': 8 });
    expect(sum(splitByRoute(0, { 'GET /v1/pets': 2 }))).toBe(0);
  });
});
