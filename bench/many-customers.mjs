// Keys that belong to customers, for `npm run bench`: the customer subject of the main comparison
// (one key of a customer, beside the gateway's lone key), and the many-customers run (one customer
// and 100,000 customers, 3 keys each, every key active), each from an API_KEYS_FILE that holds the
// customers beside their keys, as replicas without MongoDB share them. Keys and customers take the
// product's own factories and the keys file's own shapes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { newCustomerId } from '@animal-store/gateway/customers/customer-store.js';
import { toCustomerFileEntry } from '@animal-store/gateway/customers/customers-file.js';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { toKeyFileEntry } from '@animal-store/gateway/keys/keys-file.js';
import { rotating, usedMemory } from './many-keys.mjs';
import { rssBytes } from './processes.mjs';
import { cannon } from './rounds.mjs';

export const CUSTOMER_COUNTS = [1, 100_000];
export const KEYS_PER_CUSTOMER = 3;

/**
 * Subject names: `gateway1Customer` for one customer's 3 keys in turn (the ratio's denominator),
 * then `gateway100kCustomers`. (`gatewayCustomer`, in the main comparison, is one key of a customer.)
 */
export const customersSubject = (n) => (n === 1 ? 'gateway1Customer' : `gateway${n / 1000}kCustomers`);

// The gateway subject's limits, which no run reaches. The enterprise plan has no windows of its own,
// so the customer carries them and so does each key (a key of an enterprise customer needs its
// own, no looser): every request is decided on the key's minute and day and the customer's.
const LIMITS = { perMinute: 1e9, perDay: 1e9 };

/**
 * `count` customers on the enterprise plan, `KEYS_PER_CUSTOMER` keys each. Returns the file's
 * customers and keys (and `file`, the two as a keys file holds them), and the keys' Authorization headers spread over the customers: the first
 * key of every customer, then the second of every customer, and so on, so that sending them in
 * turn makes every customer active within `count` requests and every key within all of them.
 */
export function customersWithKeys(count, label) {
  const customers = [];
  const keys = [];
  const byRank = Array.from({ length: KEYS_PER_CUSTOMER }, () => []);
  for (let i = 0; i < count; i++) {
    const customer = toCustomerFileEntry({
      id: newCustomerId(),
      name: `bench ${label}-${i}`,
      plan: 'enterprise',
      limits: LIMITS,
    });
    customers.push(customer);
    for (let k = 0; k < KEYS_PER_CUSTOMER; k++) {
      const { key, record } = createKey({ plan: 'enterprise', name: `bench ${label}-${i}-${k}`, limits: LIMITS });
      keys.push(toKeyFileEntry({ ...record, customerId: customer.id }));
      byRank[k].push(`Bearer ${key}`);
    }
  }
  return { customers, keys, file: { keys, customers }, authorizations: byRank.flat() };
}

/** A keys file of one customer with its keys: the main comparison's customer subject. */
export function writeCustomerKeys(dir) {
  const { customers, keys, authorizations } = customersWithKeys(1, 'one');
  const file = join(dir, 'keys-customer.json');
  writeFileSync(file, JSON.stringify({ keys, customers }));
  return { file, authorization: authorizations[0] };
}

/**
 * A keys file of disjoint sets, one per count of `CUSTOMER_COUNTS`. Returns the file and, per
 * count, the Authorization headers of its keys in the order `customersWithKeys` gives and the ids
 * of its customers.
 */
export function writeManyCustomers(dir) {
  const made = CUSTOMER_COUNTS.map((n) => customersWithKeys(n, String(n)));
  const sets = Object.fromEntries(CUSTOMER_COUNTS.map((n, i) => [n, made[i].authorizations]));
  const customerIds = Object.fromEntries(CUSTOMER_COUNTS.map((n, i) => [n, made[i].customers.map((c) => c.id)]));
  const path = join(dir, 'keys-many-customers.json');
  writeFileSync(
    path,
    JSON.stringify({ keys: made.flatMap((m) => m.keys), customers: made.flatMap((m) => m.customers) }),
  );
  return { file: path, sets, customerIds };
}

/**
 * Sends each set's keys once, the smallest first, and reads Redis's used memory and the gateway's
 * RSS before and after each: what a customer costs once it and its keys are active (the customer's
 * windows and usage-history hash, each key's windows and history, the day's active sets).
 */
export async function primeCustomers({ admin, gateway, sets, connections }) {
  const reading = async () => ({ redisBytes: await usedMemory(admin), gatewayRssBytes: rssBytes(gateway.process.pid) });
  const readings = { 0: await reading() };
  for (const n of CUSTOMER_COUNTS) {
    const amount = sets[n].length;
    const r = await cannon({ ...rotating(gateway.url, sets[n]), connections: Math.min(connections, amount), amount });
    if (r['2xx'] !== amount) {
      throw new Error(`priming ${n} customers: ${JSON.stringify(r.statusCodeStats)} errors=${r.errors}`);
    }
    readings[n] = await reading();
  }
  const [low, top] = CUSTOMER_COUNTS;
  const per = (field) => Math.round((readings[top][field] - readings[low][field]) / top);
  return {
    readings,
    redisBytesPerActiveCustomer: per('redisBytes'),
    gatewayRssBytesPerActiveCustomer: per('gatewayRssBytes'),
  };
}

/**
 * What the Redis keys of one active customer take, by `MEMORY USAGE`: `sample` customers spread
 * over the set each get one request on each of their keys (so every window of theirs is live,
 * the minute ones included, which the used_memory step loses for customers primed more than a
 * minute before its reading), then every Redis key under their hash tags is found by one SCAN and
 * measured. Left out: the expiry entries and the day's active-keys and active-customers sets, which
 * the used_memory step counts.
 */
export async function sampleCustomerBytes({ admin, gateway, prefix, ids, authorizations, sample = 200 }) {
  const count = ids.length;
  const picked = Array.from({ length: sample }, (_, j) => Math.floor((j * count) / sample));
  for (const i of picked) {
    for (let k = 0; k < KEYS_PER_CUSTOMER; k++) {
      const res = await fetch(`${gateway.url}/v1/pets?limit=20`, {
        headers: { authorization: authorizations[i + k * count] },
      });
      if (res.status !== 200) throw new Error(`sampling customer ${ids[i]}: ${res.status}`);
      await res.arrayBuffer();
    }
  }
  const tags = new Set(picked.map((i) => `${prefix}{${ids[i]}}`));
  const found = [];
  let cursor = '0';
  do {
    const [next, names] = await admin.scan(cursor, 'MATCH', `${prefix}{cus_*`, 'COUNT', 10_000);
    cursor = next;
    for (const name of names) if (tags.has(name.slice(0, name.indexOf('}') + 1))) found.push(name);
  } while (cursor !== '0');
  const pipeline = admin.pipeline();
  for (const name of found) pipeline.memory('USAGE', name, 'SAMPLES', 0);
  const bytes = (await pipeline.exec()).reduce((sum, [err, n]) => sum + (err ? 0 : Number(n)), 0);
  return {
    customers: sample,
    redisKeysPerCustomer: Number((found.length / sample).toFixed(2)),
    memoryUsageBytesPerCustomer: Math.round(bytes / sample),
  };
}
