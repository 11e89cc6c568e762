import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryPetStore } from '../src/store/memory-pet-store.js';
import { type App, conformanceChecker, createPet, expectError, newApp, nextLink } from './helpers.js';

const MAX_EXACT = Number.MAX_SAFE_INTEGER;
const JSON_HEADERS = { 'content-type': 'application/json' };

let app: App;
let store: MemoryPetStore;
let conforms: Awaited<ReturnType<typeof conformanceChecker>>;

beforeEach(async () => {
  store = new MemoryPetStore();
  app = newApp(store);
  await app.ready();
  conforms = await conformanceChecker(app);
});

afterEach(async () => {
  await app.close();
});

async function storedCount(): Promise<number> {
  return (await store.list({ limit: 1000 })).length;
}

describe('POST /v1/pets', () => {
  it('201: answers the Pet with its id and a Location header', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/pets',
      payload: { name: 'Rex', categoryId: 5, status: 'available' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const pet = res.json();
    expect(pet).toEqual({ id: pet.id, name: 'Rex', categoryId: 5, status: 'available' });
    expect(res.headers.location).toBe(`/v1/pets?id=${pet.id}`);
    conforms(res, '/v1/pets', 'post');

    // The supported route, not the deprecated one: it answers the pet, with no Deprecation header.
    const fetched = await app.inject({ method: 'GET', url: String(res.headers.location) });
    expect(fetched.json()).toEqual([pet]);
    expect(fetched.headers.deprecation).toBeUndefined();
  });

  it('201 without status: the Pet has no status field, and does not get one later', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/pets', payload: { name: 'Plain', categoryId: 1 } });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ id: res.json().id, name: 'Plain', categoryId: 1 });
    expect(res.body).not.toContain('status');
    conforms(res, '/v1/pets', 'post');
    const fetched = await app.inject({ method: 'GET', url: `/v1/pets/${res.json().id}` });
    expect(fetched.body).not.toContain('status');
  });

  it('ignores unknown fields: neither stored nor echoed, and a client id is not used', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/pets',
      payload: { name: 'Rex', categoryId: 2, id: 999, _id: 'abc', color: 'brown', nested: { $set: { x: 1 } } },
    });
    expect(res.statusCode).toBe(201);
    const { id } = res.json();
    expect(id).not.toBe(999);
    expect(res.json()).toEqual({ id, name: 'Rex', categoryId: 2 });
    expect(await store.get(id)).toEqual({ id, name: 'Rex', categoryId: 2 });
  });

  it('accepts the edges: a 200-character name and categoryId ±(2^53−1), exactly', async () => {
    const long = await createPet(app, { name: 'x'.repeat(200), categoryId: MAX_EXACT });
    const low = await createPet(app, { name: 'y', categoryId: -MAX_EXACT });
    expect((await app.inject({ url: `/v1/pets/${long.id}` })).body).toContain(`"categoryId":${MAX_EXACT}`);
    expect((await app.inject({ url: `/v1/pets/${low.id}` })).body).toContain(`"categoryId":${-MAX_EXACT}`);
  });

  it('accepts application/json with a charset', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/pets',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      payload: JSON.stringify({ name: 'Rex', categoryId: 1 }),
    });
    expect(res.statusCode).toBe(201);
  });

  const invalidBodies: [string, string][] = [
    ['missing name', '{"categoryId":1}'],
    ['missing categoryId', '{"name":"Rex"}'],
    ['empty object', '{}'],
    ['empty name', '{"name":"","categoryId":1}'],
    ['name of 201 characters', JSON.stringify({ name: 'x'.repeat(201), categoryId: 1 })],
    ['name as a number', '{"name":5,"categoryId":1}'],
    ['name null', '{"name":null,"categoryId":1}'],
    ['categoryId as a string', '{"name":"Rex","categoryId":"5"}'],
    ['categoryId as a float', '{"name":"Rex","categoryId":1.5}'],
    ['categoryId as a boolean', '{"name":"Rex","categoryId":true}'],
    ['categoryId 2^53, not exact', '{"name":"Rex","categoryId":9007199254740992}'],
    ['categoryId -2^53, not exact', '{"name":"Rex","categoryId":-9007199254740992}'],
    ['categoryId 2^63', '{"name":"Rex","categoryId":9223372036854775808}'],
    ['status outside the enum', '{"name":"Rex","categoryId":1,"status":"lost"}'],
    ['status in another case', '{"name":"Rex","categoryId":1,"status":"Sold"}'],
    ['status null', '{"name":"Rex","categoryId":1,"status":null}'],
    ['operator-shaped name', '{"name":{"$gt":""},"categoryId":1}'],
    ['operator-shaped categoryId', '{"name":"Rex","categoryId":{"$gt":0}}'],
    ['operator-shaped status', '{"name":"Rex","categoryId":1,"status":{"$ne":"x"}}'],
    ['an array', '[{"name":"Rex","categoryId":1}]'],
    ['null', 'null'],
    ['a string', '"Rex"'],
    ['malformed JSON', '{"name":"Rex",'],
    ['not JSON at all', 'name=Rex'],
    ['an empty body', ''],
    ['a prototype-poisoning key', '{"name":"Rex","categoryId":1,"__proto__":{"admin":true}}'],
  ];

  it.each(invalidBodies)('400 for %s, and nothing is stored', async (_case, payload) => {
    const res = await app.inject({ method: 'POST', url: '/v1/pets', headers: JSON_HEADERS, payload });
    expectError(res, 400, 'invalid_request');
    conforms(res, '/v1/pets', 'post');
    expect(await storedCount()).toBe(0);
  });

  it('400 when there is no body at all', async () => {
    expectError(await app.inject({ method: 'POST', url: '/v1/pets' }), 400, 'invalid_request');
    expect(await storedCount()).toBe(0);
  });

  it('names the offending field in the 400 message', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/pets', payload: { name: 'Rex', categoryId: '5' } });
    expect(res.json().message).toContain('categoryId');
  });

  const otherMediaTypes: [string, Record<string, string>, string][] = [
    ['text/plain', { 'content-type': 'text/plain' }, '{"name":"Rex","categoryId":1}'],
    ['a form', { 'content-type': 'application/x-www-form-urlencoded' }, 'name=Rex&categoryId=1'],
    ['multipart', { 'content-type': 'multipart/form-data; boundary=x' }, '--x--'],
    ['no content type', {}, '{"name":"Rex","categoryId":1}'],
  ];

  it.each(otherMediaTypes)('415 for %s', async (_case, headers, payload) => {
    const res = await app.inject({ method: 'POST', url: '/v1/pets', headers, payload: Buffer.from(payload) });
    expectError(res, 415, 'unsupported_media_type');
    conforms(res, '/v1/pets', 'post');
    expect(await storedCount()).toBe(0);
  });

  it('413 for a body of 1 MiB + 1 byte, and accepts one just under the limit', async () => {
    const prefix = '{"name":"Rex","categoryId":1,"pad":"';
    const body = (size: number) => `${prefix}${'x'.repeat(size - prefix.length - 2)}"}`;
    const tooBig = body(1024 * 1024 + 1);
    expect(Buffer.byteLength(tooBig)).toBe(1024 * 1024 + 1);
    const res = await app.inject({ method: 'POST', url: '/v1/pets', headers: JSON_HEADERS, payload: tooBig });
    expectError(res, 413, 'payload_too_large');
    conforms(res, '/v1/pets', 'post');

    const justFits = await app.inject({
      method: 'POST',
      url: '/v1/pets',
      headers: JSON_HEADERS,
      payload: body(1024 * 1024),
    });
    expect(justFits.statusCode).toBe(201);
    expect(justFits.json()).toEqual({ id: justFits.json().id, name: 'Rex', categoryId: 1 });
  });

  it('gives 100 concurrent creates 100 distinct ids, all listed in order', async () => {
    const responses = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        app.inject({ method: 'POST', url: '/v1/pets', payload: { name: `pet ${i}`, categoryId: i } }),
      ),
    );
    expect(responses.map((r) => r.statusCode)).toEqual(Array(100).fill(201));
    const ids = responses.map((r) => r.json().id as number);
    expect(new Set(ids).size).toBe(100);
    const list = await app.inject({ url: '/v1/pets?limit=100' });
    expect(list.json().map((p: { id: number }) => p.id)).toEqual([...ids].sort((a, b) => a - b));
    expect(list.headers.link).toBeUndefined();
  });
});

describe('GET /v1/pets', () => {
  async function seed(count: number, statusOf: (i: number) => string | undefined = () => undefined) {
    const pets = [];
    for (let i = 0; i < count; i++) {
      const status = statusOf(i);
      pets.push(await createPet(app, { name: `pet ${i}`, categoryId: i, ...(status ? { status } : {}) }));
    }
    return pets;
  }

  it('200 with an empty array and no Link when there are no pets', async () => {
    const res = await app.inject({ url: '/v1/pets' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([]);
    expect(res.headers.link).toBeUndefined();
    conforms(res, '/v1/pets', 'get');
  });

  it('returns at most 20 by default, in id order, with a Link to the next page', async () => {
    const pets = await seed(25);
    const res = await app.inject({ url: '/v1/pets' });
    expect(res.statusCode).toBe(200);
    conforms(res, '/v1/pets', 'get');
    expect(res.json().map((p: { id: number }) => p.id)).toEqual(pets.slice(0, 20).map((p) => p.id));
    expect(res.headers.link).toBe(`</v1/pets?limit=20&after=${pets[19]!.id}>; rel="next"`);

    const next = await app.inject({ url: nextLink(res)! });
    expect(next.json().map((p: { id: number }) => p.id)).toEqual(pets.slice(20).map((p) => p.id));
    expect(next.headers.link).toBeUndefined();
  });

  it('has no Link when the page is exactly full and nothing follows', async () => {
    await seed(5);
    const res = await app.inject({ url: '/v1/pets?limit=5' });
    expect(res.json()).toHaveLength(5);
    expect(res.headers.link).toBeUndefined();
  });

  it('honours limit 1 and limit 100', async () => {
    await seed(102);
    const one = await app.inject({ url: '/v1/pets?limit=1' });
    expect(one.json()).toHaveLength(1);
    expect(nextLink(one)).toBe(`/v1/pets?limit=1&after=${one.json()[0].id}`);
    const hundred = await app.inject({ url: '/v1/pets?limit=100' });
    expect(hundred.json()).toHaveLength(100);
    conforms(hundred, '/v1/pets', 'get');
  });

  it('filters by status; every returned pet has it, and the Link keeps the filter', async () => {
    const statuses = ['available', 'pending', 'sold', undefined];
    const pets = await seed(14, (i) => statuses[i % 4]);
    const res = await app.inject({ url: '/v1/pets?status=sold&limit=2' });
    expect(res.statusCode).toBe(200);
    conforms(res, '/v1/pets', 'get');
    const sold = pets.filter((p) => p.status === 'sold').map((p) => p.id);
    expect(res.json().map((p: { id: number }) => p.id)).toEqual(sold.slice(0, 2));
    expect(res.json().every((p: { status: string }) => p.status === 'sold')).toBe(true);
    expect(nextLink(res)).toBe(`/v1/pets?limit=2&status=sold&after=${sold[1]}`);
  });

  it('walks every page through the next Links, each pet exactly once, in order', async () => {
    const pets = await seed(23, (i) => (i % 3 === 0 ? 'available' : 'pending'));
    for (const [query, expected] of [
      ['limit=4', pets],
      ['limit=3&status=available', pets.filter((p) => p.status === 'available')],
    ] as const) {
      const seen: number[] = [];
      let url: string | undefined = `/v1/pets?${query}`;
      while (url) {
        const res = await app.inject({ url });
        expect(res.statusCode).toBe(200);
        seen.push(...res.json().map((p: { id: number }) => p.id));
        url = nextLink(res);
      }
      expect(seen).toEqual(expected.map((p) => p.id));
    }
  });

  it('after past the last id gives an empty page; after=0 starts at the beginning', async () => {
    const pets = await seed(3);
    expect((await app.inject({ url: `/v1/pets?after=${pets[2]!.id}` })).json()).toEqual([]);
    expect((await app.inject({ url: '/v1/pets?after=0' })).json()).toHaveLength(3);
  });

  const badQueries = [
    'limit=0',
    'limit=101',
    'limit=-1',
    'limit=1.5',
    'limit=abc',
    'limit=',
    'limit=1e1',
    'limit=05',
    'limit=%2B5',
    'limit=%205',
    'limit=1&limit=2',
    'status=lost',
    'status=SOLD',
    'status=',
    'status=sold&status=pending',
    'status[$ne]=x',
    'status[]=sold',
    'unknown=1',
    'offset=10',
    'after=abc',
    'after=-1',
    'after=1.5',
    'after=9223372036854775808',
    'id=',
    'id=0',
    'id=-3',
    'id=abc',
    'id=3,,7',
    'id=3,',
    'id=1.5',
    'id=03',
    'id=1234567890123456',
    `id=${Array.from({ length: 101 }, (_, i) => i + 1).join(',')}`,
    'id=3&id=7',
  ];

  it.each(badQueries)('400 for ?%s', async (query) => {
    await seed(1);
    const res = await app.inject({ url: `/v1/pets?${query}` });
    expectError(res, 400, 'invalid_request');
    conforms(res, '/v1/pets', 'get');
    if (query.startsWith('id=')) expect(res.json().message).toMatch(/^querystring\.id /);
  });

  it('?id=N returns that pet, and ?id= a list returns those pets in id order, once each', async () => {
    const pets = await seed(10);
    const ids = pets.map((p) => p.id);
    const one = await app.inject({ url: `/v1/pets?id=${ids[2]}` });
    expect(one.statusCode).toBe(200);
    conforms(one, '/v1/pets', 'get');
    expect(one.json()).toEqual([pets[2]]);
    const many = await app.inject({ url: `/v1/pets?id=${ids[8]},${ids[2]},${ids[6]},${ids[2]}` });
    expect(many.json()).toEqual([pets[2], pets[6], pets[8]]);
    // An id that does not exist is simply left out.
    expect((await app.inject({ url: `/v1/pets?id=${ids[9]! + 1000},${ids[0]}` })).json()).toEqual([pets[0]]);
    // 100 ids are allowed.
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1).join(',');
    expect((await app.inject({ url: `/v1/pets?id=${hundred}` })).statusCode).toBe(200);
  });

  it('?id= combines with status, after and limit, and its next Link keeps the ids', async () => {
    const statuses = ['available', 'sold'];
    const pets = await seed(8, (i) => statuses[i % 2]);
    const ids = pets.map((p) => p.id);
    const list = ids.join(',');
    const sold = pets.filter((p) => p.status === 'sold');
    expect((await app.inject({ url: `/v1/pets?id=${list}&status=sold` })).json()).toEqual(sold);
    expect((await app.inject({ url: `/v1/pets?id=${list}&after=${ids[5]}` })).json()).toEqual(pets.slice(6));
    const page = await app.inject({ url: `/v1/pets?id=${ids[1]},${ids[3]},${ids[5]}&limit=2` });
    expect(page.json()).toEqual([pets[1], pets[3]]);
    expect(nextLink(page)).toBe(`/v1/pets?limit=2&id=${ids[1]},${ids[3]},${ids[5]}&after=${ids[3]}`);
    expect((await app.inject({ url: nextLink(page)! })).json()).toEqual([pets[5]]);
  });
});

describe('GET /v1/pets/{petId} (deprecated)', () => {
  function expectDeprecationHeaders(res: { headers: Record<string, unknown> }) {
    expect(res.headers.deprecation).toBe('@1767225600');
    expect(res.headers.sunset).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
    expect(String(res.headers.link)).toMatch(/^<\/v1\/pets(\?id=[1-9][0-9]*)?>; rel="successor-version"/);
  }

  it('200: the Pet, with Deprecation, Sunset and Link', async () => {
    const pet = await createPet(app, { name: 'Rex', categoryId: 9, status: 'pending' });
    const res = await app.inject({ url: `/v1/pets/${pet.id}` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id: pet.id, name: 'Rex', categoryId: 9, status: 'pending' });
    expectDeprecationHeaders(res);
    conforms(res, '/v1/pets/{petId}', 'get');
    // The successor answers the same pet: a client can migrate by following the Link.
    const successor = String(res.headers.link).match(/^<([^>]+)>; rel="successor-version"/)?.[1];
    expect(successor).toBe(`/v1/pets?id=${pet.id}`);
    expect((await app.inject({ url: successor! })).json()).toEqual([res.json()]);
  });

  it.each(['999', '-1', '0', '9007199254740992', '9007199254740993', '9223372036854775807', '-9223372036854775808'])(
    '404 not_found for the absent int64 %s, with the deprecation headers',
    async (id) => {
      await createPet(app, { name: 'Rex', categoryId: 1 });
      const res = await app.inject({ url: `/v1/pets/${id}` });
      expectError(res, 404, 'not_found');
      expectDeprecationHeaders(res);
      conforms(res, '/v1/pets/{petId}', 'get');
    },
  );

  it.each(['abc', '1.5', '1e3', '12abc', '0x10', '01', '%201', '9223372036854775808', '-9223372036854775809'])(
    '400 for the non-int64 id %s, with the deprecation headers',
    async (id) => {
      const res = await app.inject({ url: `/v1/pets/${id}` });
      expectError(res, 400, 'invalid_request');
      expectDeprecationHeaders(res);
      conforms(res, '/v1/pets/{petId}', 'get');
    },
  );

  it('400 for a query parameter the operation does not take', async () => {
    const pet = await createPet(app, { name: 'Rex', categoryId: 1 });
    const res = await app.inject({ url: `/v1/pets/${pet.id}?status=sold` });
    expectError(res, 400, 'invalid_request');
    expectDeprecationHeaders(res);
    conforms(res, '/v1/pets/{petId}', 'get');
  });
});

describe('validation messages', () => {
  // Each names the parameter or field, lists allowed values, and never speaks Ajv ("properties").
  const cases: [string, string, unknown, string][] = [
    ['POST', '/v1/pets', {}, 'body.name is required'],
    ['POST', '/v1/pets', { name: 'Rex' }, 'body.categoryId is required'],
    ['POST', '/v1/pets', { name: '', categoryId: 1 }, 'body.name must have at least 1 character'],
    ['POST', '/v1/pets', { name: 'x'.repeat(201), categoryId: 1 }, 'body.name must have at most 200 characters'],
    ['POST', '/v1/pets', { name: 'Rex', categoryId: '5' }, 'body.categoryId must be an integer'],
    ['POST', '/v1/pets', { name: 'Rex', categoryId: 2 ** 60 }, `body.categoryId must be at most ${MAX_EXACT}`],
    [
      'POST',
      '/v1/pets',
      { name: 'Rex', categoryId: 1, status: 'gone' },
      'body.status must be one of: available, pending, sold',
    ],
    ['POST', '/v1/pets', [1], 'body must be an object'],
    ['GET', '/v1/pets?status=gone', undefined, 'querystring.status must be one of: available, pending, sold'],
    [
      'GET',
      '/v1/pets?colour=red',
      undefined,
      'querystring.colour is not a known query parameter (known: limit, status, after, id)',
    ],
    ['GET', '/v1/pets?limit=0', undefined, 'querystring.limit must be at least 1'],
    ['GET', '/v1/pets?limit=101', undefined, 'querystring.limit must be at most 100'],
    ['GET', '/v1/pets?limit=ten', undefined, 'querystring.limit must be an integer'],
    ['GET', '/v1/pets?limit=1&limit=2', undefined, 'querystring.limit must be given at most once'],
    [
      'GET',
      '/v1/pets?id=3,x',
      undefined,
      'querystring.id must be 1 to 100 comma-separated animal ids (positive integers), e.g. 3,7,9',
    ],
    ['GET', '/v1/pets/1?x=1', undefined, 'querystring.x is not a known query parameter (this operation takes none)'],
    ['GET', '/v1/pets/abc', undefined, 'params.petId must be an integer'],
  ];

  it.each(cases)('%s %s %j: "%s"', async (method, url, payload, message) => {
    const res = await app.inject({
      method: method as 'GET' | 'POST',
      url,
      ...(payload === undefined ? {} : { payload: payload as object, headers: JSON_HEADERS }),
    });
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toBe(message);
  });
});

describe('response serialization', () => {
  // A store that hands back more than a Pet, as a database document might (an _id, old fields).
  class LeakyStore extends MemoryPetStore {
    override async list(options: Parameters<MemoryPetStore['list']>[0]) {
      return (await super.list(options)).map((pet) => ({ ...pet, _id: 'abc', internal: true }));
    }
    override async get(id: number) {
      const pet = await super.get(id);
      return pet && { ...pet, _id: 'abc', internal: true };
    }
  }

  it('sends exactly the Pet fields, values unchanged, whatever else the store returns', async () => {
    const leaky = new LeakyStore();
    const other = newApp(leaky);
    try {
      await leaky.create({ name: 'Rex', categoryId: Number.MAX_SAFE_INTEGER, status: 'sold' });
      await leaky.create({ name: 'Plain', categoryId: -3 });
      const list = await other.inject({ url: '/v1/pets' });
      expect(list.json()).toEqual([
        { id: 1, name: 'Rex', categoryId: Number.MAX_SAFE_INTEGER, status: 'sold' },
        { id: 2, name: 'Plain', categoryId: -3 },
      ]);
      const one = await other.inject({ url: '/v1/pets/1' });
      expect(one.json()).toEqual({ id: 1, name: 'Rex', categoryId: Number.MAX_SAFE_INTEGER, status: 'sold' });
    } finally {
      await other.close();
    }
  });
});

describe('routing', () => {
  it.each(['/v1/nope', '/pets', '/v2/pets', '/v1/pets/1/owner'])('404 not_found for GET %s', async (url) => {
    expectError(await app.inject({ url }), 404, 'not_found');
  });

  it('405 with Allow for another method on /v1/pets', async () => {
    const res = await app.inject({ method: 'DELETE', url: '/v1/pets' });
    expectError(res, 405, 'method_not_allowed');
    expect(String(res.headers.allow).split(', ')).toEqual(expect.arrayContaining(['GET', 'POST']));
  });

  it('405 with Allow for PUT /v1/pets/{petId}', async () => {
    const res = await app.inject({ method: 'PUT', url: '/v1/pets/1', payload: {} });
    expectError(res, 405, 'method_not_allowed');
    expect(String(res.headers.allow)).toContain('GET');
    expect(String(res.headers.allow)).not.toContain('PUT');
  });

  it('echoes a plain x-request-id and replaces an unsafe one', async () => {
    const kept = await app.inject({ url: '/v1/pets', headers: { 'x-request-id': 'abc-123' } });
    expect(kept.headers['x-request-id']).toBe('abc-123');
    const replaced = await app.inject({ url: '/v1/pets', headers: { 'x-request-id': 'bad id\twith spaces' } });
    expect(replaced.headers['x-request-id']).not.toBe('bad id\twith spaces');
    expect(String(replaced.headers['x-request-id'])).toMatch(/^[A-Za-z0-9-]+$/);
  });
});
