/**
 * The oldest Node.js both services run on: the gateway's HTTP client (undici 8) needs 22.19, and
 * the pets service keeps to the same line. node-version.test.ts checks it against the `engines`
 * of every runtime dependency of both.
 *
 * This module imports nothing: each service's entry loads it alone, before any dependency that a
 * too old Node would break while loading.
 */
export const MINIMUM_NODE = '22.19.0';

/**
 * What to tell an operator whose Node.js is older than MINIMUM_NODE, or undefined when it will do:
 * which version is needed, which one this is, and how to run the service on a right one.
 */
export function nodeTooOld(
  service: 'gateway' | 'pets',
  running: string = process.versions.node,
  executable: string = process.execPath,
): string | undefined {
  const [major = 0, minor = 0] = running.split('.').map(Number);
  const [needMajor = 0, needMinor = 0] = MINIMUM_NODE.split('.').map(Number);
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return (
    `${service}: needs Node.js ${MINIMUM_NODE} or later (24 LTS recommended); this is Node.js ${running} (${executable}).\n` +
    `  In a checkout, npm install puts Node 24 in node_modules/.bin: npm start uses it, or run\n` +
    `  node_modules/.bin/node services/${service}/dist/server.js\n` +
    '  Elsewhere, install Node.js 24 LTS (https://nodejs.org/en/download, or nvm install 24), or use the node:24 image.\n'
  );
}

/** Exits 1 with nodeTooOld's message when this Node.js is too old; the first thing each service does. */
export function exitIfNodeTooOld(service: 'gateway' | 'pets'): void {
  const tooOld = nodeTooOld(service);
  if (tooOld === undefined) return;
  process.stderr.write(tooOld);
  process.exit(1);
}
