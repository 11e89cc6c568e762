// `npm run bench -- --plot FILE.svg` (or `--from bench.json --plot FILE.svg` to draw a saved run):
// the panels of one run's results, two a row: requests per second against the number of active
// keys and latency against load (the gateway beside the bare proxy and the peer), then under the
// Zipf traffic CPU per request and latency against load, HAProxy among them. Plain SVG written here: a
// charting library would bring a browser or a canvas for two line charts.

const COLORS = {
  gateway: '#0b5cad',
  gatewayCustomers: '#0b5cad',
  bareProxy: '#595959',
  peer: '#b35900',
  haproxy: '#2e8b57',
};
const LABELS = {
  gateway: 'gateway',
  gatewayCustomers: 'gateway, customers (dashed)',
  bareProxy: 'bare proxy',
  peer: 'peer (@fastify/rate-limit)',
  haproxy: 'HAProxy (stick-table)',
};
const W = 460;
const H = 300;
const PAD = { left: 64, right: 16, top: 36, bottom: 48 };

const esc = (text) => String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten, at least `max`. */
function niceMax(max) {
  const power = 10 ** Math.floor(Math.log10(max || 1));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= max);
}

/** One panel: `series` [{ color, points: [[x index, y]], dash }], x labels by index. */
function panel({ x0, title, xLabels, xTitle, yTitle, series }) {
  const maxY = niceMax(Math.max(...series.flatMap((s) => s.points.map(([, y]) => y))) * 1.05);
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const px = (i) => x0 + PAD.left + (xLabels.length === 1 ? plotW / 2 : (i * plotW) / (xLabels.length - 1));
  const py = (y) => PAD.top + plotH - (y / maxY) * plotH;
  const parts = [`<text x="${x0 + PAD.left}" y="20" class="title">${esc(title)}</text>`];
  for (let t = 0; t <= 4; t++) {
    const y = (maxY * t) / 4;
    parts.push(
      `<line x1="${x0 + PAD.left}" x2="${x0 + W - PAD.right}" y1="${py(y)}" y2="${py(y)}" class="grid"/>`,
      `<text x="${x0 + PAD.left - 6}" y="${py(y) + 4}" class="tick" text-anchor="end">${Number(y.toPrecision(3))}</text>`,
    );
  }
  xLabels.forEach((label, i) => {
    // The first and last labels stay inside the panel.
    const anchor = xLabels.length > 1 && i === 0 ? 'start' : i === xLabels.length - 1 && i > 0 ? 'end' : 'middle';
    parts.push(
      `<text x="${px(i)}" y="${H - PAD.bottom + 18}" class="tick" text-anchor="${anchor}">${esc(label)}</text>`,
    );
  });
  parts.push(
    `<text x="${x0 + PAD.left + plotW / 2}" y="${H - 8}" class="axis" text-anchor="middle">${esc(xTitle)}</text>`,
    `<text transform="translate(${x0 + 14},${PAD.top + plotH / 2}) rotate(-90)" class="axis" text-anchor="middle">${esc(yTitle)}</text>`,
  );
  for (const s of series) {
    const d = s.points.map(([i, y], k) => `${k ? 'L' : 'M'}${px(i).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    parts.push(
      `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`,
      ...s.points.map(
        ([i, y]) => `<circle cx="${px(i).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${s.color}"/>`,
      ),
    );
  }
  return parts.join('\n');
}

/** Requests per second against the number of active keys (the many-keys run). */
function keysPanel(many) {
  const rps = (name) => many.requestsPerSecond[name];
  const keyLabels = many.counts.map((n) => (n >= 1000 ? `${n / 1000}k` : String(n)));
  const flat = (name) => keyLabels.map((_, i) => [i, rps(name)]);
  return {
    title: 'GET req/s as active keys grow',
    xLabels: keyLabels,
    xTitle: 'distinct keys in the traffic (dashed: one key)',
    yTitle: 'requests per second',
    series: [
      { color: COLORS.bareProxy, points: flat('bareProxy'), dash: '6 4' },
      { color: COLORS.peer, points: flat('peer'), dash: '6 4' },
      { color: COLORS.gateway, points: many.subjects.map((name, i) => [i, rps(name)]) },
    ],
  };
}

/** p99 and p50 latency at fixed shares of the bare proxy's saturation (one key, GET). */
function latencyPanel(lat) {
  const levels = Object.keys(lat.levels);
  return {
    title: 'GET p99 latency at a fixed rate',
    xLabels: levels.map((l) => `${l}: ${lat.levels[l].rate}/s`),
    xTitle: "load, as a share of the bare proxy's saturation",
    yTitle: 'p99 ms (p50 dotted)',
    series: ['bareProxy', 'peer', 'gateway'].flatMap((name) => [
      { color: COLORS[name], points: levels.map((l, i) => [i, lat.levels[l][name].p99Ms]) },
      { color: COLORS[name], points: levels.map((l, i) => [i, lat.levels[l][name].p50Ms]), dash: '2 3' },
    ]),
  };
}

/** The Zipf traffic's loads (fixed rates, then saturation) for each subject it ran. */
function trafficLoads(traffic) {
  const loads = [...Object.keys(traffic.fixed).map((rate) => [`${rate}/s`, traffic.fixed[rate]])];
  loads.push(['saturation', traffic.saturation]);
  const names = TRAFFIC_ORDER.filter((name) => name in traffic.saturation);
  return { loads, names };
}

/** CPU µs per request, the process and Redis together, of each subject under the Zipf traffic. */
function trafficCpuPanel(traffic) {
  const { loads, names } = trafficLoads(traffic);
  const cpu = (r) => (r.cpuProcessUs ?? 0) + (r.cpuRedisUs ?? 0);
  return {
    title: `CPU per request, ${traffic.plan.keys / 1000}k Zipf keys, GET+POST`,
    xLabels: loads.map(([label]) => label),
    xTitle: 'load',
    yTitle: 'CPU µs per request (process + Redis)',
    series: names.map((name) => ({
      color: COLORS[name],
      points: loads.map(([, bySubject], i) => [i, cpu(bySubject[name])]),
      ...(name === 'gatewayCustomers' && { dash: '6 4' }),
    })),
  };
}

/** p99 (and p50 dotted) of each subject under the Zipf traffic, at each load. */
function trafficLatencyPanel(traffic) {
  const { loads, names } = trafficLoads(traffic);
  return {
    title: 'Zipf traffic: p99 latency',
    xLabels: loads.map(([label]) => label),
    xTitle: 'load',
    yTitle: 'p99 ms (p50 dotted)',
    series: names.flatMap((name) => [
      { color: COLORS[name], points: loads.map(([, bySubject], i) => [i, bySubject[name].p99Ms]) },
      { color: COLORS[name], points: loads.map(([, bySubject], i) => [i, bySubject[name].p50Ms]), dash: '2 3' },
    ]),
  };
}

const TRAFFIC_ORDER = ['bareProxy', 'haproxy', 'peer', 'gateway', 'gatewayCustomers'];

/** The SVG for a run's results (the JSON `npm run bench -- --out` writes): the panels it has data for, two a row. */
export function plot(results) {
  const specs = [
    results.manyKeys && keysPanel(results.manyKeys),
    results.latency && latencyPanel(results.latency),
    results.traffic && trafficCpuPanel(results.traffic),
    results.traffic && trafficLatencyPanel(results.traffic),
  ].filter(Boolean);
  const rows = Math.ceil(specs.length / 2);
  const panels = specs
    .map(
      (spec, i) =>
        `<g transform="translate(${(i % 2) * W},${Math.floor(i / 2) * H})">\n${panel({ x0: 0, ...spec })}\n</g>`,
    )
    .join('\n');
  const shown = ['gateway', 'gatewayCustomers', 'bareProxy', 'haproxy', 'peer'].filter(
    (name) => name !== 'haproxy' || results.traffic?.saturation.haproxy,
  );
  // Each entry as wide as its label (about 6 px a character at 11 px).
  let x = PAD.left;
  const legend = shown
    .map((name) => {
      const at = x;
      x += LABELS[name].length * 6 + 36;
      return `<rect x="${at}" y="${rows * H + 8}" width="14" height="4" fill="${COLORS[name]}"/><text x="${at + 20}" y="${rows * H + 14}" class="tick">${esc(LABELS[name])}</text>`;
    })
    .join('\n');
  const note = `${esc(results.machine ?? '')}; load average ${esc(results.loadAverageAtStart ?? '?')} at the start, ${esc(results.loadAverageAtEnd ?? '?')} at the end`;
  const height = rows * H + 44;
  // A title for screen readers and image viewers: what the charts show.
  return `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="bench-title" width="${2 * W}" height="${height}" viewBox="0 0 ${2 * W} ${height}" font-family="system-ui, sans-serif">
<title id="bench-title">npm run bench: GET requests per second over 1, 1k and 100k active keys; p50/p99 latency at 25, 50 and 75 % of the bare proxy's saturation; and under Zipf-popular keys with GET and POST mixed, CPU per request and latency of the gateway, the gateway over customers, the bare proxy, HAProxy and the peer, at fixed rates and at saturation</title>
<style>.title{font-size:14px;font-weight:600}.tick{font-size:11px;fill:#333}.axis{font-size:12px;fill:#333}.grid{stroke:#ddd}</style>
<rect width="100%" height="100%" fill="#fff"/>
${panels}
${legend}
<text x="${PAD.left}" y="${rows * H + 36}" class="tick">${note}</text>
</svg>
`;
}
