import closeWithGrace from 'close-with-grace';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';

export interface Listener {
  app: FastifyInstance;
  host: string;
  port: number;
  /** The variables that set host and port: what a listener that cannot open names. */
  hostVariable: string;
  portVariable: string;
}

/**
 * A start that cannot go on for a reason the operator fixes in the environment: its message is
 * one line naming the variable and what to do, printed as it is (no stack, which says nothing here).
 */
export class StartupError extends Error {
  override name = 'StartupError';
}

/** Why `l` could not listen, as one line naming the variable to change. */
function listenProblem(err: unknown, l: Listener): string {
  const code = (err as NodeJS.ErrnoException).code;
  const at = `${l.host}:${l.port}`;
  switch (code) {
    case 'EADDRINUSE':
      return `${l.portVariable}=${l.port}: ${at} is already in use (EADDRINUSE); stop what listens there or set ${l.portVariable} to a free port`;
    case 'EACCES':
      return `${l.portVariable}=${l.port}: no permission to listen on ${at} (EACCES; ports below 1024 need privileges); set ${l.portVariable} to a port from 1024`;
    case 'EADDRNOTAVAIL':
      return `${l.hostVariable}=${l.host} is not an address of this machine (EADDRNOTAVAIL); set ${l.hostVariable} to one of its addresses, 0.0.0.0 for all of them`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
      return `${l.hostVariable}=${l.host} does not resolve (${code}); set ${l.hostVariable} to an IP address or a name this machine resolves`;
    default:
      return `cannot listen on ${at} (${code ?? (err instanceof Error ? err.message : String(err))}); check ${l.hostVariable} and ${l.portVariable}`;
  }
}

/** Waits until the logger's asynchronous destination has written everything it holds. */
function flushLog(log: FastifyBaseLogger): Promise<void> {
  const flush = (log as { flush?: (cb: (err?: Error) => void) => void }).flush;
  if (!flush) return Promise.resolve();
  return new Promise((resolve) => flush.call(log, () => resolve()));
}

/**
 * Listens, then on SIGTERM/SIGINT closes every listener: fastify stops accepting, answers
 * keep-alive stragglers 503, lets in-flight requests finish and runs onClose (clients last).
 * Then the logs are flushed, so the access lines of the last requests are not lost at exit.
 * A second signal or the grace period running out exits at once.
 */
export async function serve(listeners: Listener[], graceMs: number): Promise<void> {
  const first = listeners[0];
  if (!first) throw new Error('serve needs at least one listener');
  closeWithGrace({ delay: graceMs }, async ({ signal, err }) => {
    if (err) first.app.log.error({ err }, 'shutting down after an error');
    else first.app.log.info({ signal }, 'shutting down');
    // Reverse order: the first listener owns the clients and closes them in its onClose, last.
    for (const l of [...listeners].reverse()) {
      // Node closes the keep-alive connections that are idle when closing starts, but not those
      // busy then: once their response is done they sit idle, holding close() open until the
      // client sends again or keepAliveTimeout passes, and the grace period runs out (exit 1).
      // Closing idle connections until the listener has closed lets the process exit promptly.
      const sweep = setInterval(() => l.app.server.closeIdleConnections(), 50);
      try {
        await l.app.close();
      } finally {
        clearInterval(sweep);
      }
    }
    await Promise.all(listeners.map((l) => flushLog(l.app.log)));
  });
  for (const l of listeners) {
    try {
      await l.app.listen({ host: l.host, port: l.port });
    } catch (err) {
      throw new StartupError(listenProblem(err, l));
    }
  }
}
