// Load for `npm run bench`: autocannon, and the interleaved rounds every comparison is made of.
import autocannon from 'autocannon';

export function cannon(opts) {
  return new Promise((resolve, reject) => {
    autocannon({ pipelining: 1, ...opts }, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function expectStatus(subject, r) {
  const ok = subject.status === 200 ? r['2xx'] : (r.statusCodeStats?.[subject.status]?.count ?? 0);
  if (ok < r.requests.total * 0.99 || r.errors > 0 || r.timeouts > 0) {
    throw new Error(
      `${subject.name}: expected ${subject.status}, got ${JSON.stringify(r.statusCodeStats)} errors=${r.errors} timeouts=${r.timeouts}`,
    );
  }
}

/**
 * `subjects`: [{ name, request (autocannon options), status (expected) }]. A warm-up each, then
 * `rounds` rounds in which every subject runs once for `duration` s, the order rotated by one each
 * round. Noise on this shared machine (another engineer's build, a GC in the bench itself) then
 * lands on all subjects alike, and none always runs first or right after the same neighbour.
 * Per subject: the median of its rounds, for req/s, p50 and p99 each.
 */
export async function interleave(subjects, { connections, warmup, rounds, duration }, onRound = () => {}) {
  for (const s of subjects) await cannon({ ...s.request, connections, duration: warmup });
  const runs = Object.fromEntries(subjects.map((s) => [s.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < subjects.length; i++) {
      const s = subjects[(i + round) % subjects.length];
      const r = await cannon({ ...s.request, connections, duration });
      expectStatus(s, r);
      runs[s.name].push({ rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99 });
    }
    onRound(round, runs);
  }
  const results = {};
  for (const [name, rs] of Object.entries(runs)) {
    results[name] = {
      requestsPerSecond: Math.round(median(rs.map((r) => r.rps))),
      p50Ms: median(rs.map((r) => r.p50)),
      p99Ms: median(rs.map((r) => r.p99)),
      rounds: rs,
    };
  }
  return results;
}

/**
 * a/b for two subjects of one `interleave`: the median over rounds of the round's own ratio. The
 * two ran seconds apart in each round, so a load that drifts across rounds (it does, on a shared
 * machine) cancels out of each pair, where it would not out of a ratio of medians.
 */
export function ratioByRound(a, b) {
  return Number(median(a.rounds.map((r, i) => r.rps / b.rounds[i].rps)).toFixed(3));
}
