// Redis commands per request, from Redis's own counters (INFO commandstats) around a fixed load.
import { cannon } from './rounds.mjs';

async function commandStats(redis) {
  const text = await redis.info('commandstats');
  const stats = {};
  for (const m of text.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) stats[m[1]] = Number(m[2]);
  return stats;
}

/** INFO commandstats: each command's calls and usec so far (a script's own commands counted too). */
export async function commandCounters(redis) {
  const stats = {};
  for (const m of (await redis.info('commandstats')).matchAll(/cmdstat_([\w|-]+):calls=(\d+),usec=(\d+)/g)) {
    stats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  }
  return stats;
}

/** The calls and usec of each command run between two commandCounters readings, the readings' INFO left out. */
export function countersDelta(before, after) {
  const out = {};
  for (const [name, s] of Object.entries(after)) {
    const calls = s.calls - (before[name]?.calls ?? 0);
    if (calls > 0 && name !== 'info') out[name] = { calls, usec: s.usec - (before[name]?.usec ?? 0) };
  }
  return out;
}

function delta(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

/** Requests the client sent to Redis itself (EVALSHA counts once; the script's inner calls are listed apart). */
export function clientCommands(d) {
  // Every command the limit script calls (limits/limit-script.ts), sliding windows and the usage
  // history's counters included.
  const scriptInner = [
    'get',
    'mget',
    'incr',
    'incrby',
    'pttl',
    'pexpire',
    'pexpireat',
    'set',
    'del',
    'hget',
    'hgetall',
    'hincrby',
    'hdel',
    // The credit balance's (credits/credit-script.ts) and the webhook queue's.
    'hmget',
    'hset',
    'xadd',
  ];
  let total = 0;
  for (const [k, v] of Object.entries(d)) {
    if (k === 'info' || k.startsWith('client') || k === 'config|resetstat') continue;
    if (!scriptInner.includes(k)) total += v;
  }
  return total;
}

/** `admin`: an ioredis client on the subject's Redis; `request`: autocannon options. */
export async function commandsPerRequest(admin, request, amount = 2000) {
  const before = await commandStats(admin);
  const r = await cannon({ ...request, amount, connections: 8 });
  const d = delta(before, await commandStats(admin));
  return { requests: r.requests.total, commands: d, clientCommandsPerRequest: clientCommands(d) / r.requests.total };
}
