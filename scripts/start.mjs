// Starts the whole stack from the build: pets, then the gateway in front of it. With no
// MONGO_URL it runs embedded (in-memory stores) and seeds one demo key per plan.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiKey, hashApiKey, newKeyId } from '../services/gateway/dist/keys/api-key.js';
import { appendToKeysFile } from '../services/gateway/dist/keys/keys-file.js';

const env = process.env;
const gatewayPort = Number(env.PORT ?? 8080);
const petsPort = Number(env.PETS_PORT ?? 8090);
const adminPort = Number(env.ADMIN_PORT ?? 8081);
const embedded = !env.MONGO_URL;
const generatedToken = env.ADMIN_TOKEN ? undefined : randomBytes(24).toString('base64url');
const adminToken = env.ADMIN_TOKEN ?? generatedToken;

const demoKeys = [];
let keysFile = env.API_KEYS_FILE;
if (embedded && !keysFile) {
  keysFile = join(mkdtempSync(join(tmpdir(), 'animal-store-')), 'demo-keys.json');
  const plans = [['free'], ['pro'], ['business'], ['enterprise', { perMinute: 5_000, perDay: 1_000_000 }]];
  for (const [plan, limits] of plans) {
    const key = generateApiKey();
    const id = newKeyId();
    await appendToKeysFile(keysFile, {
      id,
      name: `demo-${plan}`,
      plan,
      ...(limits ? { limits } : {}),
      sha256: hashApiKey(key),
    });
    demoKeys.push({ plan, id, key });
  }
}

const children = [];
let stopping = false;

function start(name, script, extraEnv) {
  const child = spawn(process.execPath, [script], {
    env: { ...env, ...extraEnv },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  child.on('exit', (code, signal) => {
    if (!stopping) {
      process.stderr.write(`\n${name} exited (${signal ?? code}); stopping the stack\n`);
      stop(1);
    }
  });
  children.push(child);
  return child;
}

function stop(code = 0) {
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : null))).then(() =>
    process.exit(code),
  );
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));

async function waitReady(url, name) {
  for (let attempt = 0; attempt < 300 && !stopping; attempt++) {
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} did not become ready at ${url}`);
}

try {
  start('pets', 'services/pets/dist/server.js', { PORT: String(petsPort), HOST: env.HOST ?? '127.0.0.1' });
  await waitReady(`http://127.0.0.1:${petsPort}/readyz`, 'pets');
  start('gateway', 'services/gateway/dist/server.js', {
    PORT: String(gatewayPort),
    HOST: env.HOST ?? '0.0.0.0',
    ADMIN_PORT: String(adminPort),
    ADMIN_TOKEN: adminToken,
    PETS_URL: env.PETS_URL ?? `http://127.0.0.1:${petsPort}`,
    ...(keysFile ? { API_KEYS_FILE: keysFile } : {}),
  });
  await waitReady(`http://127.0.0.1:${gatewayPort}/readyz`, 'gateway');
} catch (err) {
  // Never leave a half-started stack holding the ports.
  process.stderr.write(`${err.message}; stopping the stack\n`);
  stop(1);
  await new Promise(() => {});
}

const lines = [
  '',
  `  Animal store API is up: http://127.0.0.1:${gatewayPort}/v1  (docs: http://127.0.0.1:${gatewayPort}/docs)`,
  `  Admin API: http://127.0.0.1:${adminPort}/admin/keys`,
  generatedToken ? `  Admin token (generated for this run): ${generatedToken}` : '  Admin token: from ADMIN_TOKEN',
];
if (demoKeys.length > 0) {
  lines.push('  Demo keys (embedded mode; they last until you stop the stack):');
  for (const k of demoKeys) lines.push(`    ${k.plan.padEnd(10)} ${k.key}`);
  lines.push(
    '',
    '  Try:',
    `    curl -i -H "Authorization: Bearer ${demoKeys[0].key}" http://127.0.0.1:${gatewayPort}/v1/pets`,
  );
}
lines.push('  Ctrl-C stops the stack.', '');
process.stdout.write(`${lines.join('\n')}\n`);
