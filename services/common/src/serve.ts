import closeWithGrace from 'close-with-grace';
import type { FastifyInstance } from 'fastify';

export interface Listener {
  app: FastifyInstance;
  host: string;
  port: number;
}

/**
 * Listens, then on SIGTERM/SIGINT closes every listener: fastify stops accepting, answers
 * keep-alive stragglers 503, lets in-flight requests finish and runs onClose (clients last).
 * A second signal or the grace period running out exits at once.
 */
export async function serve(listeners: Listener[], graceMs: number): Promise<void> {
  const first = listeners[0];
  if (!first) throw new Error('serve needs at least one listener');
  closeWithGrace({ delay: graceMs }, async ({ signal, err }) => {
    if (err) first.app.log.error({ err }, 'shutting down after an error');
    else first.app.log.info({ signal }, 'shutting down');
    // Reverse order: the first listener owns the clients and closes them in its onClose, last.
    for (const l of [...listeners].reverse()) await l.app.close();
  });
  for (const l of listeners) {
    await l.app.listen({ host: l.host, port: l.port });
  }
}
