// Seeded, skewed traffic for `npm run bench`: which key (or customer) each request comes from,
// drawn from a Zipf-like popularity (a few hot, a long tail), and whether it is a GET or a POST.
// Seeded so two runs, and every subject of one run, send the same sequence.

/** mulberry32: a small seeded generator of floats in [0, 1); Math.random cannot be seeded. */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Draws ranks 0..n-1 with P(rank k) ∝ 1/(k+1)^s, by binary search in the cumulative weights. */
function zipfSampler(n, s, random) {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let k = 0; k < n; k++) {
    sum += 1 / (k + 1) ** s;
    cdf[k] = sum;
  }
  return () => {
    const u = random() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

/**
 * `length` requests (cycled when a run sends more): `ranks[i]` the popularity rank of request i's
 * key, `posts[i]` 1 for a POST. `postShare` of them are POSTs, drawn independently of the key.
 */
export function trafficPlan({ n, s = 1.1, seed = 42, postShare = 0.1, length = 1 << 20 }) {
  const random = seededRandom(seed);
  const next = zipfSampler(n, s, random);
  const ranks = new Int32Array(length);
  const posts = new Uint8Array(length);
  for (let i = 0; i < length; i++) {
    ranks[i] = next();
    posts[i] = random() < postShare ? 1 : 0;
  }
  const distinct = new Set(ranks).size;
  const top = (share) => {
    let count = 0;
    const limit = Math.max(1, Math.round(n * share));
    for (const r of ranks) if (r < limit) count++;
    return Number((count / length).toFixed(3));
  };
  return { n, s, seed, postShare, ranks, posts, distinct, topShare: { '1%': top(0.01), '10%': top(0.1) } };
}
