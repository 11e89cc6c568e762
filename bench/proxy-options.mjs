// The @fastify/http-proxy options of the bare proxy and the peer: the gateway's undici pool
// (128 connections, no pipelining, 60 s keep-alive; see services/gateway/src/proxy/proxy.ts) and no
// retries, so the three differ only in what they do besides proxying.
export function proxyOptions(upstream) {
  return {
    upstream,
    prefix: '/v1',
    rewritePrefix: '/v1',
    undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 },
    replyOptions: { retryDelay: () => null },
  };
}
