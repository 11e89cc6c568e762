// `npm run migrate [-- gateway|pets]`: builds the MongoDB indexes and runs the data migrations of
// each service (pets, then the gateway) in the database MONGO_URL names, by each service's own
// `server.js migrate`, the command the Kubernetes Job and the compose one-shot service run. The
// services only check their indexes at start and refuse without them. Safe to run again, and from
// two places at once. Exit 0 when every service's migration is done, else 1.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SERVICES = ['pets', 'gateway'];
const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !SERVICES.includes(name));
if (unknown.length > 0) {
  process.stderr.write(
    `npm run migrate: no service ${unknown.join(', ')}; name ${SERVICES.join(' or ')}, or none for both\n`,
  );
  process.exit(1);
}
if (!process.env.MONGO_URL) {
  process.stderr.write(
    'npm run migrate: MONGO_URL is not set: set it to the MongoDB to migrate (its path names the database, else gateway and pets)\n',
  );
  process.exit(1);
}

for (const name of asked.length > 0 ? asked : SERVICES) {
  const child = spawn(process.execPath, [resolve(root, `services/${name}/dist/server.js`), 'migrate'], {
    stdio: 'inherit',
  });
  const [code, signal] = await once(child, 'exit');
  if (code !== 0) {
    process.stderr.write(
      `npm run migrate: ${name} did not finish (${signal ?? `exit ${code}`}); nothing after it ran\n`,
    );
    process.exit(1);
  }
}
