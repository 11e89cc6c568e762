// HAProxy as a subject of `npm run bench`: what an operator would pick for raw speed, a C proxy
// with a per-key rate limit. A stick-table keyed on the Authorization header (the bearer key)
// counts each key's requests over 60 s and answers 429 over the limit; no key at all is a 401. It
// checks no key against a list and keeps no history: a reference line on the charts, not a peer.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, start, waitFor } from './processes.mjs';

/** The haproxy binary's path, or null where it is not installed. */
export function haproxyBinary() {
  try {
    return execFileSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/**
 * `tableSize`: entries of the stick-table (one per active key; more than the traffic's keys, so
 * none is evicted). `perMinute`: the limit per key, high enough that no run reaches it. The upstream
 * pool is the bare proxy's size (128 connections, kept alive and reused).
 */
function haproxyConfig({ port, upstream, tableSize, perMinute }) {
  const pets = new URL(upstream);
  return `global
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    option http-keep-alive
frontend api
    bind 127.0.0.1:${port}
    stick-table type string len 128 size ${tableSize} expire 60s store http_req_rate(60s)
    http-request deny deny_status 401 unless { req.hdr(authorization) -m found }
    http-request track-sc0 req.hdr(authorization)
    http-request deny deny_status 429 if { sc_http_req_rate(0) gt ${perMinute} }
    default_backend pets
backend pets
    http-reuse always
    server pets ${pets.hostname}:${pets.port} maxconn 128
`;
}

/** Starts HAProxy in front of `upstream` (foreground, no master process: one pid to measure). */
export async function startHaproxy({ binary, dir, upstream, tableSize, authorization }) {
  const port = await freePort();
  const file = join(dir, 'haproxy.cfg');
  writeFileSync(file, haproxyConfig({ port, upstream, tableSize, perMinute: 1_000_000_000 }));
  const child = start('haproxy', binary, ['-db', '-f', file]);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/v1/pets`, { headers: { authorization } });
  return { url, process: child, headers: { authorization } };
}
