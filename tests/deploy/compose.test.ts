// Validates docker-compose.yml and the staging and embedded overrides (alone and merged) against the Compose
// Specification JSON schema, as shipped by the dclint package, and asserts the stack's invariants.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BASE = 'docker-compose.yml';
const STAGING = 'deploy/compose/staging.yml';
const EMBEDDED = 'deploy/compose/embedded.yml';

interface Service {
  image?: string;
  build?: { context?: string; dockerfile?: string };
  command?: string | string[];
  ports?: (string | number | { target: number | string; published?: number | string; host_ip?: string })[];
  environment?: Record<string, string | number | boolean | null> | string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[]; disable?: boolean };
  volumes?: (string | { type?: string; source?: string; target: string })[];
}
interface ComposeFile {
  name?: string;
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
  secrets?: Record<string, unknown>;
}

const load = (file: string): ComposeFile =>
  parse(readFileSync(join(repoRoot, file), 'utf8'), { merge: true }) as ComposeFile;

/** The compose-spec schema. dclint keeps an up-to-date copy of compose-spec/schema/compose-spec.json. */
function composeSchema(): Record<string, unknown> {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve('dclint/package.json'));
  const schema = JSON.parse(readFileSync(join(dir, 'schemas', 'compose.schema.json'), 'utf8'));
  // Ajv knows draft-07 under its canonical id only.
  schema.$schema = 'http://json-schema.org/draft-07/schema#';
  return schema;
}
const validate = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true }).compile(composeSchema());

function expectValid(file: string, config: unknown) {
  const ok = validate(config);
  expect(validate.errors ?? [], `${file} against the compose spec`).toEqual([]);
  expect(ok).toBe(true);
}

/** Compose's merge of an override file: maps merge, `ports` append, any other value is replaced. */
function merge(base: unknown, override: unknown, key = ''): unknown {
  if (Array.isArray(base) && Array.isArray(override) && key === 'ports') return [...base, ...override];
  if (isMap(base) && isMap(override)) {
    const out: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries(override)) out[k] = k in base ? merge(base[k], v, k) : v;
    return out;
  }
  return override;
}
const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Resolves `${VAR:-default}` to its default and other references to a marker, like an unset environment. */
const interpolate = (s: string) =>
  s.replace(/\$\{([A-Za-z0-9_]+)(?::?([-?])([^}]*))?\}/g, (_m, name, op, arg) => (op === '-' ? arg : `<${name}>`));

/** host_ip, published and target of a port entry (short or long syntax). */
function parsePort(port: NonNullable<Service['ports']>[number]) {
  if (typeof port === 'object') {
    return { hostIp: port.host_ip, published: port.published?.toString(), target: port.target.toString() };
  }
  const parts = interpolate(String(port)).split(':');
  const target = parts.pop() ?? '';
  const published = parts.pop();
  return { hostIp: parts.pop(), published, target: target.replace(/\/(tcp|udp)$/, '') };
}

function environment(service: Service): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(env.map((e) => [e.split('=')[0] ?? '', e.slice(e.indexOf('=') + 1)]));
  }
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v == null ? '' : String(v)]));
}

const base = load(BASE);
const staging = load(STAGING);
const merged = merge(base, staging) as ComposeFile;
const SERVICES = ['mongo', 'redis', 'pets', 'gateway'];
/** The one-shot migration before each service that uses MongoDB (docs/mongodb.md, Migrations). */
const MIGRATIONS = { pets: 'migrate-pets', gateway: 'migrate-gateway' } as const;

describe('compose files against the compose spec', () => {
  it(`${BASE} is valid`, () => expectValid(BASE, base));
  it(`${STAGING} is valid`, () => expectValid(STAGING, staging));
  it(`${BASE} + ${STAGING} merged is valid`, () => expectValid('merged', merged));
  it(`${EMBEDDED} is valid, and merged onto ${BASE}`, () => {
    const embedded = load(EMBEDDED);
    expectValid(EMBEDDED, embedded);
    expectValid('embedded merged', merge(base, embedded));
  });
});

describe(BASE, () => {
  it('defines mongo, redis, pets and gateway, each with a healthcheck, and the one-shot migrations', () => {
    expect(Object.keys(base.services).sort()).toEqual([...SERVICES, ...Object.values(MIGRATIONS)].sort());
    for (const name of SERVICES) {
      const healthcheck = base.services[name]?.healthcheck;
      expect(healthcheck?.test, `${name} healthcheck`).toBeDefined();
      expect(healthcheck?.disable ?? false).toBe(false);
    }
  });

  it('publishes only the gateway: the API 8080 and the portal 8082 publicly, the admin API on 127.0.0.1', () => {
    for (const [name, service] of Object.entries(base.services)) {
      if (name !== 'gateway') expect(service.ports ?? [], `${name} ports`).toEqual([]);
    }
    const ports = (base.services.gateway?.ports ?? []).map(parsePort);
    expect(ports.filter((p) => p.hostIp !== '127.0.0.1').map((p) => p.target)).toEqual(['8080', '8082']);
    expect(ports.find((p) => p.target === '8082')?.published).toBe('8082');
    expect(ports.filter((p) => p.target === '8081').map((p) => p.hostIp)).toEqual(['127.0.0.1']);
  });

  it("builds a gateway image that exposes every port compose maps and carries the portal's files", () => {
    const dockerfile = readFileSync(join(repoRoot, base.services.gateway?.build?.dockerfile ?? ''), 'utf8');
    const exposed = [...dockerfile.matchAll(/^EXPOSE\s+(.+)$/gm)].flatMap((m) => m[1]?.trim().split(/\s+/) ?? []);
    const targets = (base.services.gateway?.ports ?? []).map((p) => parsePort(p).target);
    expect(exposed).toEqual(expect.arrayContaining([...targets, '8082']));
    // In production the portal reads its page at start: the build context and the final stage keep it.
    expect(readFileSync(join(repoRoot, '.dockerignore'), 'utf8')).toMatch(/^!services\/gateway\/portal$/m);
    expect(dockerfile).toMatch(/^COPY services\/gateway\/portal services\/gateway\/portal$/m);
  });

  it('runs the portal on the published 8082, its sign-in links on the address that reaches it', () => {
    const gateway = environment(base.services.gateway!);
    expect([gateway.PORTAL_HOST, gateway.PORTAL_PORT]).toEqual(['0.0.0.0', '8082']);
    // The operator's PORTAL_URL when set, else the published port on this host.
    expect(gateway.PORTAL_URL).toMatch(/^\$\{PORTAL_URL:-[^}]+\}$/);
    const url = interpolate(gateway.PORTAL_URL ?? '');
    const published = (base.services.gateway?.ports ?? []).map(parsePort).find((p) => p.target === '8082');
    expect(url).toBe(`http://localhost:${published?.published}`);
    // The gateway's own rule: an origin, no path.
    expect(url).toMatch(/^https?:\/\/[^/?#]+$/);
  });

  it('serves metrics on their own port: the gateway 9464 on 127.0.0.1 only, pets 9465 unpublished', () => {
    const gateway = environment(base.services.gateway!);
    const pets = environment(base.services.pets!);
    expect([gateway.METRICS_HOST, gateway.METRICS_PORT]).toEqual(['0.0.0.0', '9464']);
    expect([pets.METRICS_HOST, pets.METRICS_PORT]).toEqual(['0.0.0.0', '9465']);
    const ports = (base.services.gateway?.ports ?? []).map(parsePort);
    expect(ports.find((p) => p.target === '9464')?.hostIp).toBe('127.0.0.1');
    expect(ports.map((p) => p.target)).not.toContain('9465');
  });

  it('starts each service only after its dependencies are healthy', () => {
    const conditions = (name: string) => base.services[name]?.depends_on as Record<string, { condition?: string }>;
    expect(conditions('gateway')).toEqual({
      pets: { condition: 'service_healthy' },
      redis: { condition: 'service_healthy' },
      mongo: { condition: 'service_healthy' },
      'migrate-gateway': { condition: 'service_completed_successfully' },
    });
    expect(conditions('pets')).toEqual({
      mongo: { condition: 'service_healthy' },
      'migrate-pets': { condition: 'service_completed_successfully' },
    });
  });

  // Without it a service with MONGO_URL refuses to start (its indexes are missing).
  it.each([
    [BASE, base],
    [`${BASE} + ${STAGING}`, merged],
    [`${BASE} + ${EMBEDDED}`, merge(base, load(EMBEDDED)) as ComposeFile],
  ])('%s: every service with a MONGO_URL starts after its migration ran on that URL', (_file, config) => {
    for (const [name, service] of Object.entries(config.services)) {
      const url = environment(service).MONGO_URL;
      if (!url || Object.values(MIGRATIONS).includes(name as never)) continue;
      const migration = MIGRATIONS[name as keyof typeof MIGRATIONS];
      expect(migration, `${name} uses MONGO_URL: a migration of its own`).toBeDefined();
      const depends = service.depends_on as Record<string, { condition?: string }>;
      expect(depends[migration]?.condition, `${name} waits for ${migration}`).toBe('service_completed_successfully');
      const oneShot = config.services[migration]!;
      expect(environment(oneShot).MONGO_URL, `${migration} migrates ${name}'s MongoDB`).toBe(url);
      // The service's image, running its own migration, once.
      expect(oneShot.image).toBe(service.image);
      expect(oneShot.command).toEqual(['node', `services/${name}/dist/server.js`, 'migrate']);
      expect((oneShot as { restart?: string }).restart).toBe('no');
    }
  });

  it('the embedded stack (no MongoDB) has nothing to migrate, and its one-shots say so and succeed', () => {
    const embedded = merge(base, load(EMBEDDED)) as ComposeFile;
    for (const [name, migration] of Object.entries(MIGRATIONS)) {
      expect(environment(embedded.services[name]!).MONGO_URL).toBe('');
      expect(embedded.services[migration]?.image).toBe(embedded.services[name]?.image);
      expect(embedded.services[migration]?.command).toEqual([
        'node',
        '-e',
        "console.log('embedded stack: no MongoDB, nothing to migrate')",
      ]);
    }
  });

  it('persists Redis (append-only file) and MongoDB in named volumes', () => {
    const command = base.services.redis?.command;
    const redisArgs = Array.isArray(command) ? command.join(' ') : (command ?? '');
    expect(redisArgs).toMatch(/--appendonly\s+yes/);
    const mount = (name: string, target: string) =>
      (base.services[name]?.volumes ?? [])
        .map((v) => (typeof v === 'string' ? v.split(':') : [v.source, v.target]))
        .find(([, t]) => t === target)?.[0];
    const mongoVolume = mount('mongo', '/data/db');
    const redisVolume = mount('redis', '/data');
    expect(mongoVolume && mongoVolume in (base.volumes ?? {})).toBe(true);
    expect(redisVolume && redisVolume in (base.volumes ?? {})).toBe(true);
  });

  it('wires the gateway to pets, Redis and MongoDB, in production mode', () => {
    const gateway = environment(base.services.gateway!);
    expect(gateway.PETS_URL).toBe('http://pets:8090');
    expect(gateway.REDIS_URL).toMatch(/^redis:\/\/redis:6379/);
    expect(gateway.MONGO_URL).toMatch(/^mongodb:\/\/mongo:27017/);
    expect(gateway.NODE_ENV).toBe('production');
    expect(environment(base.services.pets!).MONGO_URL).toMatch(/^mongodb:\/\/mongo:27017/);
    expect(environment(base.services.pets!).NODE_ENV).toBe('production');
  });

  it('holds no admin token or credential literally', () => {
    const gateway = environment(base.services.gateway!);
    const token = gateway.ADMIN_TOKEN;
    if (token !== undefined) {
      // Interpolated from the operator's environment, and required: no default value.
      expect(token).toMatch(/^\$\{ADMIN_TOKEN:?\?[^}]*\}$/);
    } else {
      expect(gateway.ADMIN_TOKEN_FILE, 'ADMIN_TOKEN or ADMIN_TOKEN_FILE').toBeDefined();
    }
    for (const [name, service] of Object.entries(merged.services)) {
      for (const [key, value] of Object.entries(environment(service))) {
        expect(value, `${name} ${key}`).not.toMatch(/:\/\/[^/\s:@]+:[^/\s@]+@/);
        if (/TOKEN|PASSWORD|SECRET/.test(key) && key !== 'ADMIN_TOKEN_FILE') expect(value).toMatch(/^\$\{/);
      }
    }
  });

  it('pins the data-store images to a tag', () => {
    for (const name of ['mongo', 'redis']) {
      expect(base.services[name]?.image, name).toMatch(/^[^:]+:(?!latest$)[\w.-]+$/);
    }
  });
});

describe(`${BASE} + ${STAGING}`, () => {
  it('runs as its own project, so containers and volumes stay apart', () => {
    expect(merged.name).toBeDefined();
    expect(merged.name).not.toBe(base.name);
  });

  it('publishes nothing beyond the gateway API and portal except on 127.0.0.1', () => {
    for (const [name, service] of Object.entries(merged.services)) {
      const exposed = (service.ports ?? []).map(parsePort).filter((p) => p.hostIp !== '127.0.0.1');
      expect(
        exposed.map((p) => p.target),
        `${name} ports not bound to 127.0.0.1`,
      ).toEqual(name === 'gateway' ? ['8080', '8082'] : []);
    }
  });

  it('runs MongoDB as a one-member replica set, initiated once, that every MONGO_URL names', () => {
    expect(merged.services.mongo?.command).toEqual(expect.arrayContaining(['--replSet', 'rs0']));
    const check = [merged.services.mongo?.healthcheck?.test ?? []].flat().join(' ');
    expect(check).toContain("rs.initiate({ _id: 'rs0', members: [{ _id: 0, host: 'mongo:27017' }] })");
    expect(check).toContain('directConnection=true');
    for (const name of ['pets', 'gateway', ...Object.values(MIGRATIONS)]) {
      expect(environment(merged.services[name]!).MONGO_URL, name).toBe('mongodb://mongo:27017/?replicaSet=rs0');
    }
  });

  it('logs at debug level and fails closed when Redis is unreachable', () => {
    expect(environment(merged.services.gateway!).LOG_LEVEL).toBe('debug');
    expect(environment(merged.services.gateway!).RATE_LIMIT_FAILURE_MODE).toBe('closed');
    expect(environment(merged.services.pets!).LOG_LEVEL).toBe('debug');
  });
});

const REGIONS_FILE = 'deploy/compose/regions.yml';

describe(`${BASE} + ${REGIONS_FILE}`, () => {
  const regions = load(REGIONS_FILE);
  const stack = merge(base, regions) as ComposeFile;

  it('is valid alone and merged, as a project of its own', () => {
    expectValid(REGIONS_FILE, regions);
    expectValid('regions merged', stack);
    expect(stack.name).toBe('animal-store-regions');
  });

  it('runs two regions, each gateway on its own Redis and its own NATS, both on the one MongoDB', () => {
    const gateways = { eu: stack.services.gateway, us: stack.services['gateway-us'] };
    const env = Object.fromEntries(Object.entries(gateways).map(([r, s]) => [r, environment(s ?? {})]));
    expect([env.eu?.REGION, env.us?.REGION]).toEqual(['eu', 'us']);
    expect([env.eu?.NATS_URL, env.us?.NATS_URL]).toEqual(['nats://nats-eu:4222', 'nats://nats-us:4222']);
    expect([env.eu?.REDIS_URL, env.us?.REDIS_URL]).toEqual(['redis://redis:6379/0', 'redis://redis-us:6379/0']);
    expect(env.us?.MONGO_URL).toBe(env.eu?.MONGO_URL);
    for (const [region, service] of Object.entries(gateways)) {
      expect(Object.keys(service?.depends_on ?? {}), region).toContain(`nats-${region}`);
    }
    // Region us publishes its admin API on the host's loopback only, as eu does.
    const ports = (stack.services['gateway-us']?.ports ?? []).map(parsePort);
    expect(ports.filter((p) => p.target === '8081').map((p) => p.hostIp)).toEqual(['127.0.0.1']);
  });

  it('joins the regions’ NATS servers as a supercluster, each with JetStream, in files nats-server accepts', () => {
    for (const [region, other] of [
      ['eu', 'us'],
      ['us', 'eu'],
    ]) {
      const file = `deploy/compose/regions/nats-${region}.conf`;
      const text = readFileSync(join(repoRoot, file), 'utf8');
      expect(text).toMatch(/^jetstream \{/m);
      expect(text).toContain(`{ name: ${other}, url: "nats://nats-${other}:7222" }`);
      // nats-server -t reads the file as the server would, and refuses what it would refuse.
      const checked = spawnSync('nats-server', ['-t', '-c', join(repoRoot, file)], { encoding: 'utf8' });
      expect(checked.error, 'nats-server must be on PATH (apt-get install nats-server)').toBeUndefined();
      expect(`${checked.stdout}${checked.stderr}`, file).toContain('is valid');
    }
  });
});
