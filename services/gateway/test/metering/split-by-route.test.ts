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

  it('takes the excess off the smallest routes first whatever their order, a route at its last unit gone', () => {
    expect(splitByRoute(6, { a: 1, b: 5, c: 3 })).toEqual({ b: 5, c: 1 });
    expect(splitByRoute(6, { b: 5, c: 3, a: 1 })).toEqual({ b: 5, c: 1 });
    expect(splitByRoute(5, { a: 2, b: 5 })).toEqual({ b: 5 });
    expect(splitByRoute(0, { a: 2, b: 5 })).toEqual({});
  });

  it('counts a route at 0 or below as nothing, and leaves it out', () => {
    expect(splitByRoute(3, { a: 3, b: 0 })).toEqual({ a: 3 });
    expect(splitByRoute(3, { a: 3, b: -2 })).toEqual({ a: 3 });
    expect(splitByRoute(1, { a: 3, b: -2 })).toEqual({ a: 1 });
    expect(splitByRoute(4, { a: 3, b: -2 })).toEqual({ a: 3, [UNATTRIBUTED_ROUTE]: 1 });
  });
});
