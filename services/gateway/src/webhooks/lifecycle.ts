import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Webhooks } from './webhooks.js';

/**
 * Deliveries start once the public app is ready and stop when it closes, so a replica makes them
 * only while it serves; the line says where they wait (info: server.ts's backends line is the
 * warning for embedded mode as a whole, and names the webhook queue too).
 */
export const webhookLifecycle = fp(
  async (app: FastifyInstance, opts: { webhooks: Webhooks }) => {
    const { webhooks } = opts;
    app.addHook('onReady', async () => {
      await webhooks.start();
      if (webhooks.queue.kind === 'memory') {
        app.log.info(
          'webhooks: deliveries wait in memory (embedded mode, no Redis): a restart loses those not yet made, and subscriptions last as long as this process',
        );
      } else {
        app.log.info(`webhooks: deliveries queued in ${webhooks.queue.kind}, shared by every replica`);
      }
    });
    app.addHook('onClose', async () => {
      await webhooks.close();
    });
  },
  { name: 'webhooks' },
);
