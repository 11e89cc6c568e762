// Renders deploy/k8s/components/monitoring with each overlay and checks it against the services
// as they run: the ServiceMonitors find the Services' metrics port, the alerts and the dashboard
// exist, and every metric name an alert or a panel uses is one the services really expose.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildMetricsApp, createRegistry } from '@animal-store/common/metrics.js';
import { buildApp as buildGateway } from '@animal-store/gateway/app.js';
import { loadConfig } from '@animal-store/gateway/config.js';
import { createDeps } from '@animal-store/gateway/deps.js';
import { addKey, bearer } from '@animal-store/gateway/test/support/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import * as k8s from 'kubernetes-models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { kustomizeCommand, kustomizeOnPath } from '../support/runtime.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const overlaysDir = join(repoRoot, 'deploy', 'k8s', 'overlays');
const component = join(repoRoot, 'deploy', 'k8s', 'components', 'monitoring');
const overlays = readdirSync(overlaysDir, { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(join(overlaysDir, e.name, 'kustomization.yaml')))
  .map((e) => e.name)
  .sort();

/** Series that come from elsewhere than the services (kube-state-metrics), named on purpose. */
const EXTERNAL = new Set(['kube_deployment_status_replicas_unavailable']);

const REQUIRED_ALERTS = [
  'RateLimiterOnFallback',
  'RateLimiterUnavailable',
  'UpstreamErrorRateHigh',
  'GatewayServerErrorRateHigh',
  'GatewayLatencyP99High',
  'BanSurge',
  'KeyEventsNotSubscribed',
  'KeyStoreErrors',
  'PodsNotReady',
];

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec?: Record<string, unknown>;
}
interface Rule {
  alert?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Panel {
  title: string;
  targets?: { expr: string }[];
}

/** The overlay with the component added, as an operator enables it (`components:`), rendered. */
function renderWithMonitoring(overlay: string): K8sObject[] {
  const overlayDir = join(overlaysDir, overlay);
  const namespace = (parse(readFileSync(join(overlayDir, 'kustomization.yaml'), 'utf8')) as { namespace: string })
    .namespace;
  const dir = mkdtempSync(join(tmpdir(), 'monitoring-'));
  try {
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        `namespace: ${namespace}`,
        'resources:',
        `  - ${relative(dir, overlayDir)}`,
        'components:',
        `  - ${relative(dir, component)}`,
        '',
      ].join('\n'),
    );
    const [command, args] = kustomizeCommand()(dir);
    const output = execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return parseAllDocuments(output)
      .map((doc) => doc.toJS() as K8sObject | null)
      .filter((o): o is K8sObject => o !== null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const PROMQL_WORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'or',
  'and',
  'unless',
  'bool',
  'offset',
]);

/** Metric names in a PromQL expression: identifiers that are not functions, keywords, labels or numbers. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?|\d[\d.eE+-]*/g)) {
    const [, name, call] = match;
    if (name && !call && !PROMQL_WORDS.has(name)) names.add(name);
  }
  return [...names];
}

/** Families (`# TYPE`) and the sample names each one exposes. */
function exposedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const line of exposition.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (!type) continue;
    const [, family = '', kind] = type;
    names.add(family);
    if (kind === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(`${family}${s}`);
    if (kind === 'summary') for (const s of ['_sum', '_count']) names.add(`${family}${s}`);
  }
  return names;
}

const exposed = new Set<string>();
const closers: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  // Both services as server.ts builds them (default process metrics on), embedded, with traffic.
  const petsRegistry = createRegistry('pets');
  const pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: petsRegistry });
  await pets.listen({ host: '127.0.0.1', port: 0 });
  closers.push(() => pets.close());
  const address = pets.server.address() as { port: number };
  const config = loadConfig({ LOG_LEVEL: 'silent', PETS_URL: `http://127.0.0.1:${address.port}` });
  const deps = await createDeps(config);
  const gateway = await buildGateway(config, deps);
  closers.push(() => gateway.close());
  const { key } = await addKey(deps, 'pro');
  expect((await gateway.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
  expect((await gateway.inject({ url: '/v1/pets/1', headers: bearer(key) })).statusCode).toBe(404);
  expect((await gateway.inject({ url: '/v1/pets' })).statusCode).toBe(401);

  for (const [name, registry] of [
    ['gateway', deps.registry],
    ['pets', petsRegistry],
  ] as const) {
    const metrics = await buildMetricsApp(registry, { serviceName: name, logLevel: 'silent' });
    const res = await metrics.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    for (const n of exposedNames(res.body)) exposed.add(n);
    await metrics.close();
  }
});

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

it('reads metric names out of PromQL', () => {
  expect(
    metricNames(
      'histogram_quantile(0.99, sum by (le, route) (rate(http_request_duration_seconds_bucket{route!="x"}[5m]))) > 1e-9',
    ),
  ).toEqual(['http_request_duration_seconds_bucket']);
  expect(metricNames('(sum(rate(a_total[5m])) or vector(0)) + sum(b_total) / clamp_min(c, 1)')).toEqual([
    'a_total',
    'b_total',
    'c',
  ]);
});

// Without kubectl or kustomize these are skipped: tests/deploy/manifests.test.ts fails once saying so.
describe.runIf(kustomizeOnPath()).each(overlays)('overlay %s with components/monitoring', (overlay) => {
  const objects = () => renderWithMonitoring(overlay);
  let rendered: K8sObject[] = [];
  beforeAll(() => {
    rendered = objects();
  });
  const one = (kind: string, name: string) => {
    const found = rendered.find((o) => o.kind === kind && o.metadata.name === name);
    if (!found) throw new Error(`no ${kind}/${name}`);
    return found;
  };

  it.each(['gateway', 'pets'])('has a ServiceMonitor for %s on its Service’s metrics port', (app) => {
    const monitor = one('ServiceMonitor', app);
    const service = one('Service', app) as K8sObject & { spec: { ports: { name?: string }[] } };
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor.metadata.namespace).toBe(service.metadata.namespace);
    const spec = monitor.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string; path: string }[];
    };
    for (const [k, v] of Object.entries(spec.selector.matchLabels)) expect(service.metadata.labels?.[k]).toBe(v);
    expect(spec.endpoints).toHaveLength(1);
    expect(spec.endpoints[0]).toMatchObject({ port: 'metrics', path: '/metrics' });
    expect(service.spec.ports.map((p) => p.name)).toContain('metrics');
  });

  it('has a PrometheusRule with the alerts operators need, each with a severity and a summary', () => {
    const rule = one('PrometheusRule', 'animal-store');
    const rules = ((rule.spec as { groups: { rules: Rule[] }[] }).groups ?? []).flatMap((g) => g.rules);
    expect(rules.map((r) => r.alert)).toEqual(expect.arrayContaining(REQUIRED_ALERTS));
    for (const r of rules) {
      expect(['warning', 'critical'], r.alert).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
    }
  });

  it('has the Grafana dashboard as a ConfigMap for the sidecar, with the panels operators need', () => {
    const configMap = one('ConfigMap', 'animal-store-dashboard');
    expect(() => new k8s.v1.ConfigMap(configMap as never).validate()).not.toThrow();
    expect(configMap.metadata.labels?.grafana_dashboard).toBe('1');
    const dashboard = JSON.parse(configMap.data?.['animal-store.json'] ?? '') as { uid: string; panels: Panel[] };
    expect(dashboard.uid).toBe('animal-store');
    const titles = dashboard.panels.map((p) => p.title.toLowerCase()).join(' | ');
    for (const topic of [
      'traffic by route and status',
      'decisions by outcome and source',
      'bans',
      'upstream errors',
      'latency percentiles',
      'redis errors',
    ]) {
      expect(titles).toContain(topic);
    }
  });

  it('uses only metric names the services expose (or named external ones) in alerts and panels', () => {
    const rule = one('PrometheusRule', 'animal-store');
    const exprs = ((rule.spec as { groups: { rules: Rule[] }[] }).groups ?? []).flatMap((g) =>
      g.rules.map((r) => r.expr),
    );
    const dashboard = JSON.parse(one('ConfigMap', 'animal-store-dashboard').data?.['animal-store.json'] ?? '') as {
      panels: Panel[];
    };
    for (const panel of dashboard.panels) for (const t of panel.targets ?? []) exprs.push(t.expr);
    expect(exprs.length).toBeGreaterThan(REQUIRED_ALERTS.length);
    const used = new Set(exprs.flatMap(metricNames));
    expect(used.size).toBeGreaterThan(5);
    const missing = [...used].filter((name) => !exposed.has(name) && !EXTERNAL.has(name));
    expect(missing, `not in the services' /metrics: ${missing.join(', ')}`).toEqual([]);
  });
});
