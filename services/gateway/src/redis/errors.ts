/*
 * ioredis reports most "Redis cannot be reached" failures as plain Errors told apart only by
 * their message (it exports no class for a timed-out command or a closed stream), Redis itself
 * by the first word of its reply, and the socket by a Node error code.
 */

/** ioredis's own messages for a command that never got an answer. */
const CLIENT_MESSAGES = [
  'Command timed out',
  'Connection is closed.',
  "Stream isn't writeable and enableOfflineQueue options is false",
  "Cluster isn't ready and enableOfflineQueue options is false",
  'None of startup nodes is available',
  'Failed to refresh slots cache.',
  'Cluster is disconnected.',
  'Cluster is disconnecting.',
  'Cluster is ended.',
  'Node is disconnected',
  'Connection is aborted',
];
const CLIENT_PREFIXES = ['Too many Cluster redirections', 'Reached the max retries per request limit'];

/**
 * Redis's replies that mean "not now": loading, busy, a cluster or a failover in progress; and a
 * fenced write that reached Redis after its deadline and did nothing (fenced-writes.ts).
 */
const TRANSIENT_REPLIES = [
  'LOADING',
  'BUSY',
  'CLUSTERDOWN',
  'TRYAGAIN',
  'MASTERDOWN',
  'READONLY',
  'NOREPLICAS',
  'FENCED',
];

const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * Whether an error from an ioredis command means Redis cannot be reached right now (stalled,
 * down, failing over) rather than that the command was wrong: the caller may retry later.
 */
export function isRedisUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const { message, name } = err;
  if (name === 'MaxRetriesPerRequestError' || name === 'ClusterAllFailedError') return true;
  if (CLIENT_MESSAGES.includes(message) || CLIENT_PREFIXES.some((p) => message.startsWith(p))) return true;
  if (name === 'ReplyError' && TRANSIENT_REPLIES.includes(message.split(' ', 1)[0] ?? '')) return true;
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' && SOCKET_CODES.has(code);
}
