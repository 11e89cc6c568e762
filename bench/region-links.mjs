// The links between regions' NATS servers on one machine: a supercluster's configuration, and a
// TCP proxy that holds every chunk `delayMs` in each direction, in order: the ocean between two
// regions' NATS servers, on loopback. A NATS gateway connection names the gateway that dialled it
// in its first CONNECT line ({"gateway":"eu",...}), so `cut(name)` ends that gateway's connections
// through this proxy and refuses its new ones, and `heal(name)` lets them in again: a link cut
// between two regions, in one direction of dialling. No package fits: the ones on npm forward
// without a delay or without a per-peer cut.
import { connect, createServer } from 'node:net';

/** Starts the proxy on a free loopback port; `target` is where it forwards ({ host, port }). */
export async function startDelayProxy({ target, delayMs }) {
  const cutOff = new Set();
  const open = new Set();
  // How long chunks were really held: this process's timers fire late on a busy machine, and the
  // bound is stated with the delay the counts met, not the one asked for.
  let held = [];
  const hold = (ms) => held.push(ms);
  const server = createServer((client) => {
    const link = { client, upstream: connect(target), peer: null };
    open.add(link);
    const end = () => {
      open.delete(link);
      client.destroy();
      link.upstream.destroy();
    };
    client.on('error', end).on('close', end);
    link.upstream.on('error', end).on('close', end);
    let head = '';
    pipeDelayed(client, link.upstream, delayMs, hold, (chunk) => {
      if (link.peer !== null || head.length > 4096) return true;
      head += chunk.toString('latin1');
      const name = /"gateway":"([^"]+)"/.exec(head)?.[1];
      if (name === undefined) return true;
      link.peer = name;
      if (cutOff.has(name)) end();
      return !cutOff.has(name);
    });
    pipeDelayed(link.upstream, client, delayMs, hold, () => true);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    cut(name) {
      cutOff.add(name);
      for (const link of open) if (link.peer === name) link.client.destroy();
    },
    heal(name) {
      cutOff.delete(name);
    },
    /** The chunks held since the last call: { chunks, p50Ms, p99Ms, maxMs }. */
    takeHeld() {
      const sorted = held.sort((a, b) => a - b);
      held = [];
      const at = (q) => Number((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(1));
      return { chunks: sorted.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: at(1) };
    },
    close() {
      for (const link of open) link.client.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * Writes what `from` reads to `to`, each chunk `delayMs` after it arrived, and tells `hold` how
 * long it really waited. Timers of one delay fire in the order they were set, so the stream keeps
 * its order. `admit(chunk)` false drops it.
 */
function pipeDelayed(from, to, delayMs, hold, admit) {
  from.on('data', (chunk) => {
    if (!admit(chunk)) return;
    const arrived = performance.now();
    setTimeout(() => {
      hold(performance.now() - arrived);
      if (!to.destroyed) to.write(chunk);
    }, delayMs);
  });
}

/**
 * A region's nats-server in a supercluster on loopback: JetStream, a cluster of one, and a NATS
 * gateway to every other region through that region's proxy (`ports[r].proxy`), which it also
 * advertises, so no server learns a way around the proxies. `ports[r]`: client, http, route,
 * gateway, proxy.
 */
export function superclusterConfig(region, ports, storeDir) {
  const others = Object.keys(ports)
    .filter((r) => r !== region)
    .map((r) => `{ name: ${r}, url: "nats://127.0.0.1:${ports[r].proxy}" }`)
    .join(', ');
  const own = ports[region];
  return `server_name: nats-${region}
listen: 127.0.0.1:${own.client}
http: 127.0.0.1:${own.http}
jetstream { store_dir: "${storeDir}", max_memory_store: 64MB, max_file_store: 1GB }
cluster { name: ${region}, listen: 127.0.0.1:${own.route}, routes: ["nats://127.0.0.1:${own.route}"] }
gateway { name: ${region}, listen: 127.0.0.1:${own.gateway}, advertise: "127.0.0.1:${own.proxy}", gateways: [${others}] }
`;
}
