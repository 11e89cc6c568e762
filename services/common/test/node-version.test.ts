import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { MINIMUM_NODE, nodeTooOld } from '../src/node-version.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

describe('nodeTooOld', () => {
  it.each(['22.19.0', '22.20.1', '23.0.0', '24.21.0', '26.0.0'])('lets Node %s run the services', (running) => {
    expect(nodeTooOld('gateway', running, '/opt/node/bin/node')).toBeUndefined();
  });

  it.each(['22.18.9', '22.12.0', '20.20.2', '18.20.8'])(
    'tells Node %s which version it needs and how to get it',
    (running) => {
      expect(nodeTooOld('gateway', running, '/usr/bin/node')).toBe(
        `gateway: needs Node.js 22.19.0 or later (24 LTS recommended); this is Node.js ${running} (/usr/bin/node).\n` +
          '  In a checkout, npm install puts Node 24 in node_modules/.bin: npm start uses it, or run\n' +
          '  node_modules/.bin/node services/gateway/dist/server.js\n' +
          '  Elsewhere, install Node.js 24 LTS (https://nodejs.org/en/download, or nvm install 24), or use the node:24 image.\n',
      );
    },
  );
});

/** The package.json a service's dependency was installed with: its own node_modules first, then the root's. */
function installed(service: string, name: string): { engines?: { node?: string } } {
  for (const dir of [`${ROOT}services/${service}/node_modules`, `${ROOT}node_modules`]) {
    try {
      return JSON.parse(readFileSync(`${dir}/${name}/package.json`, 'utf8'));
    } catch {
      // Not installed there: the next place.
    }
  }
  throw new Error(`${name} (a dependency of ${service}) is not installed`);
}

describe('MINIMUM_NODE', () => {
  it.each(['gateway', 'pets', 'common'])('is no older than any runtime dependency of %s needs', (service) => {
    const manifest = JSON.parse(readFileSync(`${ROOT}services/${service}/package.json`, 'utf8'));
    const needs: Array<[string, string]> = [];
    for (const name of Object.keys(manifest.dependencies ?? {})) {
      const range = installed(service, name).engines?.node;
      const lowest = range === undefined ? null : semver.minVersion(range);
      if (lowest && semver.gt(lowest, MINIMUM_NODE)) needs.push([name, range as string]);
    }
    expect(needs, 'dependencies that need a newer Node than MINIMUM_NODE').toEqual([]);
  });

  it('is what the engines of the repository say', () => {
    const root = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8'));
    expect(semver.minVersion(root.engines.node)?.version).toBe(MINIMUM_NODE);
  });
});
