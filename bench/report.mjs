// What `npm run bench` prints: one table per request, the ratios, and the extras.
const out = (line = '') => process.stdout.write(`${line}\n`);
const num = (v, width) => String(v).padStart(width);

/** `results`: { [name]: { requestsPerSecond, p50Ms, p99Ms, rounds } } in the order to print. */
export function printTable(title, results) {
  out(`${title.padEnd(22)}${num('req/s', 8)}${num('p50 ms', 8)}${num('p99 ms', 8)}   req/s per round`);
  for (const [name, r] of Object.entries(results)) {
    out(
      `  ${name.padEnd(20)}${num(r.requestsPerSecond, 8)}${num(r.p50Ms, 8)}${num(r.p99Ms, 8)}   ${r.rounds.map((x) => x.rps).join(' ')}`,
    );
  }
}

/** Ratios keyed `get.a/b` and `post.a/b` side by side; any other key on a line of its own. */
export function printRatios(ratios) {
  out(`\nratios of req/s (median of the rounds' ratios)${num('GET', 9)}${num('POST', 8)}`);
  const pairs = Object.keys(ratios)
    .filter((k) => k.startsWith('get.') && `post.${k.slice(4)}` in ratios)
    .map((k) => k.slice(4));
  for (const pair of pairs)
    out(`  ${pair.padEnd(45)}${num(ratios[`get.${pair}`], 9)}${num(ratios[`post.${pair}`], 8)}`);
  for (const [k, v] of Object.entries(ratios)) {
    if (!pairs.some((p) => k === `get.${p}` || k === `post.${p}`)) out(`  ${k.padEnd(45)}${num(v, 9)}`);
  }
}

const signed = (ms) => (ms < 0 ? `${ms}` : `+${ms}`);

/** A paired CPU figure (run.mjs pairedCpu): its ratio and each round's a/b. */
const paired = (what, ratioName, { rate, ratio, rounds }) =>
  `${what}, both loaded at once at ${rate} req/s each: ${ratioName} ${ratio} (rounds: ${rounds.map((r) => `${r.a}/${r.b}`).join(' ')})`;

export function printExtras({
  refusals,
  redis,
  latency,
  memory,
  perRequest: c,
  config,
  againstCpu,
  againstCpu100kKeys,
  bareProxyCpu,
  customerCpu,
  manyCustomers,
}) {
  if (bareProxyCpu) {
    out(paired('CPU µs per request', '(gateway + Redis)/bareProxy', bareProxyCpu));
  }
  if (customerCpu) out(paired('CPU µs per request', 'gatewayCustomer/gateway', customerCpu));
  if (config.against) {
    out(`gatewayAgainst: ${config.against.ref} (${config.against.commit}), ${config.against.packages}`);
    out(paired('  CPU µs per request', 'gateway/gatewayAgainst', againstCpu));
  }
  if (!config.quick) printFullRunExtras({ refusals, redis, latency, memory });
  if (manyCustomers) printManyCustomers(manyCustomers);
  if (againstCpu100kKeys) {
    out(paired('CPU µs per request over 100k keys', 'gateway/gatewayAgainst', againstCpu100kKeys));
  }
  out(
    `per request at ${c.rate} req/s${num('CPU µs', 12)}${num('+ Redis', 9)}${num('stdout B', 10)}   (Redis less its idle µs/s: raw, idle)`,
  );
  for (const [name, r] of Object.entries(c.subjects)) {
    const idle =
      r.redisIdleUsPerSecond === undefined || r.redisIdleUsPerSecond === null
        ? ''
        : `   ${r.redisRaw}, ${r.redisIdleUsPerSecond}`;
    out(`  ${name.padEnd(26)}${num(r.process, 12)}${num(r.redis ?? '', 9)}${num(r.stdoutBytes, 10)}${idle}`);
  }
}

const kib = (b) => `${(b / 1024).toFixed(0)} KiB`;

function printManyCustomers(m) {
  const top = m.counts.at(-1);
  out(
    `memory per active customer (${m.keysPerCustomer} keys each): Redis ${m.redisBytesPerActiveCustomer} B (used_memory step over ${top} customers); gateway RSS +${m.gatewayRssBytesPerActiveCustomer} B`,
  );
  out(
    `  MEMORY USAGE of a customer's Redis keys, every window live (${m.customers} customers): ${m.memoryUsageBytesPerCustomer} B in ${m.redisKeysPerCustomer} keys`,
  );
  for (const [n, r] of Object.entries(m.readings)) {
    out(
      `  ${String(n).padEnd(8)} customers active: Redis used ${kib(r.redisBytes)}, gateway RSS ${kib(r.gatewayRssBytes)}`,
    );
  }
  out(
    `redis commands per request over ${top} customers: ${m.redis.clientCommandsPerRequest.toFixed(3)}  ${JSON.stringify(m.redis.commands)}`,
  );
}

function printFullRunExtras({ refusals, redis, latency, memory }) {
  out(
    `refusals on the gateway, req/s as a share of admitted: 429 ${refusals['429/admitted']}, banned ${refusals['banned/admitted']}`,
  );
  out('redis commands per request (sent by the client; script internals listed in the JSON)');
  for (const [name, r] of Object.entries(redis)) {
    out(`  ${name.padEnd(16)} ${r.clientCommandsPerRequest.toFixed(3)}  ${JSON.stringify(r.commands)}`);
  }
  out(`latency at a fixed rate (share of the bare proxy's ${latency.saturation} req/s)   p50 / p99 ms`);
  for (const [level, l] of Object.entries(latency.levels)) {
    const pair = (name) => `${l[name].p50Ms.toFixed(2)} / ${l[name].p99Ms.toFixed(2)}`;
    out(
      `  ${level.padEnd(4)} ${num(l.rate, 6)}/s  bareProxy ${pair('bareProxy')}  gateway ${pair('gateway')}  peer ${pair('peer')}  added p99 ${signed(latency.p99AddedMs[level])}`,
    );
  }
  out(
    `memory per active key: Redis ${memory.redisBytesPerActiveKey} B; gateway key cache ${memory.gatewayBytesPerCachedKey} B per entry, ${kib(memory.gatewayBytesPerCachedKey * memory.keyCacheMax)} full (KEY_CACHE_MAX ${memory.keyCacheMax}); gateway RSS +${memory.gatewayRssBytesPerActiveKey} B per active key`,
  );
  for (const [n, r] of Object.entries(memory.readings)) {
    out(`  ${String(n).padEnd(8)} keys active: Redis used ${kib(r.redisBytes)}, gateway RSS ${kib(r.gatewayRssBytes)}`);
  }
}

/** One load's table: per subject req/s (saturation), p50/p99, CPU µs, Redis commands and round trips per request. */
function printLoad(title, bySubject) {
  out(
    `${title.padEnd(28)}${num('req/s', 7)}${num('p50 ms', 8)}${num('p99 ms', 8)}${num('CPU µs', 8)}${num('+Redis', 8)}${num('cmds', 7)}${num('calls', 7)}${num('trips', 7)}   CPU per round`,
  );
  for (const [name, r] of Object.entries(bySubject)) {
    out(
      `  ${name.padEnd(26)}${num(r.requestsPerSecond ?? '', 7)}${num(r.p50Ms, 8)}${num(r.p99Ms, 8)}${num(r.cpuProcessUs, 8)}${num(r.cpuRedisUs ?? '', 8)}${num(r.redisCommandsPerRequest, 7)}${num(r.redisCallsPerRequest, 7)}${num(r.redisRoundTripsPerRequest, 7)}   ${r.rounds.map((x) => x.cpu).join(' ')}${r.answeredShare < 1 ? `  (${(r.answeredShare * 100).toFixed(1)} % answered)` : ''}`,
    );
  }
}

/** bench/traffic.mjs's results. */
export function printTraffic(t) {
  const p = t.plan;
  out(
    `\ntraffic: ${p.keys} keys, Zipf s=${p.s} (top 1 % of keys ${p.shareOfTop['1%'] * 100} % of requests), ${p.postShare * 100} % POST, seed ${p.seed}; ` +
      `customers: ${t.customers.count} of ${t.customers.keysPerCustomer} keys; HAProxy: ${t.haproxy}; load average ${t.loadAverage.start} → ${t.loadAverage.end}`,
  );
  if (t.redisIdleUsPerSecond) {
    const idle = Object.entries(t.redisIdleUsPerSecond).map(([what, xs]) => `${what}: ${xs.join(' ')}`);
    out(`  Redis idle µs/s per round, taken off each subject's Redis CPU: ${idle.join('; ')}`);
  }
  printLoad('at saturation', t.saturation);
  for (const [rate, bySubject] of Object.entries(t.fixed)) {
    printLoad(`at ${rate} req/s (open loop)`, bySubject);
    const stages = Object.entries(t.stages[rate] ?? {})
      .map(([name, x]) => `${name} ${x.p50Ms}/${x.p99Ms}`)
      .join(', ');
    out(`  Server-Timing, p50/p99 ms: ${stages}`);
  }
}

/** bench/credits-cost.mjs's results: the two sets side by side per load, and their ratio. */
export function printRegions(r) {
  out(
    `\nregions on the hot path: NATS_URL unset (twice) and set, ${r.keys} keys under Zipf traffic; load average ${r.loadAverage.start} → ${r.loadAverage.end}`,
  );
  for (const [load, sets] of Object.entries(r.loads)) {
    printLoad(load === 'saturation' ? 'at saturation' : `at ${load} req/s (open loop)`, sets);
    const x = r.ratios[load];
    out(
      `  CPU per request (process + Redis) ÷ one region's: regions ${x.regionsCpu}, the same build again ${x.controlCpu}`,
    );
  }
}

export function printCredits(c) {
  out(
    `\ncredits on the hot path: ${c.customers} customers spending credits against ${c.customers} without, one gateway; load average ${c.loadAverage.start} → ${c.loadAverage.end}`,
  );
  for (const [load, sets] of Object.entries(c.loads)) {
    printLoad(load === 'saturation' ? 'at saturation' : `at ${load} req/s (open loop)`, sets);
    const r = c.ratios[load];
    out(
      `  credits ÷ plain: process CPU ${r.cpuProcess}, Redis CPU ${r.cpuRedis}, Redis commands ${r.redisCommands}, calls in Redis ${r.redisCalls}`,
    );
  }
}
