import { Agent, request } from 'node:http';

/** One answer as a client sees it. */
export interface Answer {
  status: number;
  code?: string;
}

/**
 * Clients sharing one key, each honouring Retry-After: it sends until its first 429, then waits
 * the time that 429 announces (at least until the window resets, beyond any test), so it sends
 * nothing more here. Returns each worker's answers.
 */
export async function politeWorkers(count: number, send: (worker: number) => Promise<Answer>): Promise<Answer[][]> {
  return Promise.all(
    Array.from({ length: count }, async (_, worker) => {
      const answers: Answer[] = [];
      for (let i = 0; i < 10_000; i++) {
        const answer = await send(worker);
        answers.push(answer);
        if (answer.status === 429) break;
      }
      return answers;
    }),
  );
}

/**
 * A client that ignores the 429 it got: it keeps sending, one request after another, for `ms`
 * after its first 429 (or until it is banned). Returns its answers.
 */
export async function impatientClient(ms: number, send: (i: number) => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  let firstRefusalAt: number | undefined;
  for (let i = 0; i < 100_000; i++) {
    const answer = await send(i);
    answers.push(answer);
    if (answer.code === 'api_key_banned') break;
    if (answer.status === 429) firstRefusalAt ??= Date.now();
    if (firstRefusalAt !== undefined && Date.now() - firstRefusalAt > ms) break;
  }
  return answers;
}

/** An answer as a client of a simulated fleet reads it: on a 429, its Retry-After in whole seconds. */
export interface TimedAnswer extends Answer {
  retryAfter?: number;
}

/**
 * A client of a simulated fleet: when it first sends (ms from the start of the run), and after each
 * answer when it sends next, or null when it is done.
 */
export interface FleetClient {
  start: number;
  next(answer: TimedAnswer, at: number): number | null;
}

/** The earliest a client that honours Retry-After sends again after an answer: at once unless it was a 429. */
function honouring(answer: TimedAnswer, at: number, otherwise: number): number {
  return answer.status === 429 ? at + (answer.retryAfter ?? 0) * 1_000 : otherwise;
}

/**
 * The fleets of clients that share one key in the ban tests. Each client that honours Retry-After
 * comes back the moment its Retry-After ends: the most a polite client can send.
 */
export const fleets = {
  /** `n` clients of one request each, `gapMs` apart. */
  oneRequestEach: (n: number, gapMs: number): FleetClient[] =>
    Array.from({ length: n }, (_, i) => ({ start: i * gapMs, next: () => null })),
  /** `n` pollers each sending every `everyMs`, their starts spread over one period; a 429 sleeps its Retry-After. */
  pollers: (n: number, everyMs: number): FleetClient[] =>
    Array.from({ length: n }, (_, i) => ({
      start: Math.floor((i * everyMs) / n),
      next: (answer, at) => honouring(answer, at, at + everyMs),
    })),
  /** `n` workers starting `gapMs` apart, each sending every `paceMs`; a 429 sleeps its Retry-After. */
  workers: (n: number, gapMs: number, paceMs: number): FleetClient[] =>
    Array.from({ length: n }, (_, i) => ({
      start: i * gapMs,
      next: (answer, at) => honouring(answer, at, at + paceMs),
    })),
  /** One client sending every `paceMs` from `startMs` on, whatever it is told. */
  rude: (paceMs: number, startMs = 0): FleetClient[] => [{ start: startMs, next: (_answer, at) => at + paceMs }],
};

export interface FleetRun {
  /** Every answer in order, with when it came (ms from the start) and to which client. */
  answers: Array<TimedAnswer & { client: number; at: number }>;
  /** When the first `api_key_banned` came (ms from the start), or null. */
  bannedAt: number | null;
}

/**
 * Runs a fleet for `forMs` on a clock the run moves: to each instant a client is due, where every
 * client due then sends at once, so the answers do not depend on how fast the machine is. Stops at
 * the first ban.
 */
export async function runFleet(
  clients: FleetClient[],
  clock: { now(): number; advance(ms: number): Promise<void> },
  send: (client: number) => Promise<TimedAnswer>,
  forMs: number,
): Promise<FleetRun> {
  const startedAt = clock.now();
  const due: Array<number | null> = clients.map((c) => c.start);
  const answers: FleetRun['answers'] = [];
  for (;;) {
    const at = Math.min(...due.map((d) => d ?? Number.POSITIVE_INFINITY));
    if (at > forMs) return { answers, bannedAt: null };
    await clock.advance(startedAt + at - clock.now());
    const sending = clients.flatMap((_, i) => (due[i] === at ? [i] : []));
    const got = await Promise.all(sending.map((i) => send(i)));
    sending.forEach((i, k) => {
      const answer = got[k] as TimedAnswer;
      answers.push({ ...answer, client: i, at });
      due[i] = (clients[i] as FleetClient).next(answer, at);
    });
    if (got.some((a) => a.code === 'api_key_banned')) return { answers, bannedAt: at };
  }
}

/** How the clients of a fleet reach the gateway. */
export interface FleetNetwork {
  /** Each client from its own loopback address (127.0.0.2, .3, …), or every one from 127.0.0.1. */
  addresses: 'one' | 'many';
  /** Each client on one connection it keeps alive, or on a new connection for every request. */
  connections: 'keep-alive' | 'new';
}

/**
 * HTTP clients for a simulated fleet, over real sockets: `get(client, url, headers)` sends a GET
 * as that client and reads its answer. `close()` ends the connections kept alive.
 */
export function httpFleet(network: FleetNetwork) {
  const agents = new Map<number, Agent>();
  const agentOf = (client: number): Agent | false => {
    if (network.connections === 'new') return false;
    let agent = agents.get(client);
    if (!agent) {
      agent = new Agent({ keepAlive: true, maxSockets: 1 });
      agents.set(client, agent);
    }
    return agent;
  };
  return {
    get(client: number, url: string, headers: Record<string, string>): Promise<TimedAnswer> {
      const localAddress = network.addresses === 'many' ? `127.0.0.${2 + (client % 250)}` : '127.0.0.1';
      return new Promise((resolve, reject) => {
        const req = request(url, { headers, agent: agentOf(client), localAddress }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            body += chunk;
          });
          res.on('end', () => {
            const retryAfter = res.headers['retry-after'];
            resolve({
              status: res.statusCode ?? 0,
              code: (JSON.parse(body) as { code?: string }).code,
              ...(retryAfter === undefined ? {} : { retryAfter: Number(retryAfter) }),
            });
          });
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end();
      });
    },
    close(): void {
      for (const agent of agents.values()) agent.destroy();
    },
  };
}
