// Latency at a fixed request rate (open loop) for `npm run bench`: requests leave on a schedule,
// whatever the answers do, and each one's latency counts from when it was due, so a slow answer
// that holds a connection shows in the figures instead of slowing the load down (autocannon's
// closed loop would wait, and hide it). Microsecond resolution: autocannon's histograms keep whole
// milliseconds, too coarse for what a proxy adds on loopback.
import { Agent, request } from 'node:http';

/**
 * `rate` requests a second to `url` for `seconds`, over at most `connections` kept-alive sockets.
 * `next`, when given, makes each request (`{ method, path, headers, body }`, the path under `url`'s
 * origin) and any 2xx counts as answered; `serverTiming`, an array, gets each answer's
 * Server-Timing header.
 */
export async function fixedRate({
  url,
  headers = {},
  rate,
  seconds,
  connections = 32,
  expect = 200,
  next,
  serverTiming,
}) {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const target = new URL(url);
  const latencies = [];
  let errors = 0;
  let unexpected = 0;
  const total = Math.round(rate * seconds);
  const start = process.hrtime.bigint();
  const dueAt = (i) => start + BigInt(Math.round((i * 1e9) / rate));
  const fixed = { method: 'GET', path: `${target.pathname}${target.search}`, headers };
  const ok = next ? (status) => status >= 200 && status < 300 : (status) => status === expect;
  const one = (due) =>
    new Promise((resolve) => {
      const r = next ? next() : fixed;
      const req = request(
        { agent, host: target.hostname, port: target.port, method: r.method, path: r.path, headers: r.headers },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (ok(res.statusCode)) latencies.push(Number(process.hrtime.bigint() - due) / 1e6);
            else unexpected++;
            if (serverTiming && res.headers['server-timing']) serverTiming.push(res.headers['server-timing']);
            resolve();
          });
        },
      );
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(r.body);
    });
  const pending = [];
  let sent = 0;
  // A tick each millisecond sends every request due by then: timers cannot fire per request at
  // thousands a second, and a request sent up to a millisecond late is measured from its due time.
  await new Promise((resolve) => {
    const tick = () => {
      const now = process.hrtime.bigint();
      while (sent < total && dueAt(sent) <= now) pending.push(one(dueAt(sent++)));
      if (sent < total) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  await Promise.all(pending);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (p) =>
    Number((latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? 0).toFixed(3));
  return { rate, requests: total, answered: latencies.length, errors, unexpected, p50Ms: at(0.5), p99Ms: at(0.99) };
}
