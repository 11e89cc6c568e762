// Lints both OpenAPI documents the gateway serves, with the gateway's defaults: the public one,
// built from the pets service's own document (taken from the app in process, no listener) by the
// same publicDocument the gateway applies, and the admin API's, as its admin listener answers
// GET /admin/openapi.json (built in process, embedded stores). Each is written to a temporary
// file, then checked by Redocly (recommended ruleset, redocly.yaml) and Spectral (spectral:oas,
// .spectral.yaml). Any warning fails: a deliberate exception belongs in those files, with the
// reason beside it.
//
// Needs the build (`npm run lint` runs tsc -b first).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRegistry } from '@animal-store/common/metrics.js';
import { buildAdminApp } from '@animal-store/gateway/admin/app.js';
import { loadConfig } from '@animal-store/gateway/config.js';
import { createDeps } from '@animal-store/gateway/deps.js';
import { publicDocument } from '@animal-store/gateway/reference/openapi.js';
import { publicDocumentOptions } from '@animal-store/gateway/reference/openapi-description.js';
import { buildApp } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = (name) => join(root, 'node_modules', '.bin', name);

async function servedDocument() {
  const pets = buildApp(
    { logLevel: 'silent' },
    { store: new MemoryPetStore(), registry: createRegistry('pets', false) },
  );
  try {
    const res = await pets.inject({ url: '/v1/openapi.json' });
    if (res.statusCode !== 200) throw new Error(`the pets service answered ${res.statusCode} for its document`);
    return publicDocument(res.json(), publicDocumentOptions(loadConfig({})));
  } finally {
    await pets.close();
  }
}

async function adminDocument() {
  const token = 'lint-openapi-admin-token';
  const config = loadConfig({ ADMIN_TOKEN: token, LOG_LEVEL: 'silent' });
  const admin = await buildAdminApp(config, await createDeps(config, {}, { defaultMetrics: false }));
  try {
    const res = await admin.inject({ url: '/admin/openapi.json', headers: { authorization: `Bearer ${token}` } });
    if (res.statusCode !== 200) throw new Error(`the admin listener answered ${res.statusCode} for its document`);
    return res.json();
  } finally {
    await admin.close();
  }
}

function run(command, args) {
  const result = spawnSync(command, args, {
    cwd: root,
    encoding: 'utf8',
    // No update check, no usage reporting: the gate runs offline.
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
  });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, out: `${result.stdout}${result.stderr}` };
}

const dir = mkdtempSync(join(tmpdir(), 'animal-store-openapi-'));
let failed = false;

/** Lints one document; reports each tool's verdict under the document's name. */
function lint(name, doc) {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);

  // Redocly exits 0 on warnings: its JSON report gives the count.
  const redocly = run(bin('redocly'), ['lint', file, '--config', join(root, 'redocly.yaml'), '--format=json']);
  let totals;
  try {
    totals = JSON.parse(redocly.stdout).totals;
  } catch {
    totals = undefined;
  }
  if (redocly.status !== 0 || !totals || totals.errors > 0 || totals.warnings > 0) {
    failed = true;
    const human = run(bin('redocly'), ['lint', file, '--config', join(root, 'redocly.yaml')]);
    process.stderr.write(`openapi (${name}): redocly lint found problems:\n${human.out}\n`);
  } else {
    process.stdout.write(`openapi (${name}): redocly lint: no errors, no warnings (${totals.ignored} ignored)\n`);
  }

  const spectral = run(bin('spectral'), [
    'lint',
    file,
    '--ruleset',
    join(root, '.spectral.yaml'),
    '--fail-severity',
    'hint',
  ]);
  if (spectral.status !== 0) {
    failed = true;
    process.stderr.write(`openapi (${name}): spectral lint found problems:\n${spectral.out}\n`);
  } else {
    process.stdout.write(`openapi (${name}): spectral lint: no problems\n`);
  }
}

try {
  lint('public', await servedDocument());
  lint('admin', await adminDocument());
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
