import { fileURLToPath } from 'node:url';
import { buildServiceImages } from './containers.js';

/**
 * Builds the service images once, before any suite of the container tier starts a container.
 * @public vitest.containers.config.ts names this file as its global setup; nothing imports it.
 */
export default async function setup(): Promise<void> {
  const started = Date.now();
  await buildServiceImages(fileURLToPath(new URL('../..', import.meta.url)));
  console.log(`[containers] service images built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
