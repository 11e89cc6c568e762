// Renders every kustomize overlay under deploy/k8s/overlays, validates each object against the
// Kubernetes OpenAPI schemas shipped by kubernetes-models (offline), and asserts the deployment
// invariants operators rely on (probes, restricted pods, secrets by reference, network isolation).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '@animal-store/gateway/config.js';
import { parsePlansFile } from '@animal-store/gateway/plans/plans-file.js';
import * as k8s from 'kubernetes-models';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { kustomizeCommand } from '../support/runtime.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const overlaysDir = join(repoRoot, 'deploy', 'k8s', 'overlays');
const overlays = readdirSync(overlaysDir, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(join(overlaysDir, entry.name, 'kustomization.yaml')))
  .map((entry) => entry.name)
  .sort();
const APPS = ['gateway', 'pets'] as const;

// Only the fields these tests read; everything else is checked by the schemas.
interface Probe {
  httpGet?: { path?: string; port: number | string };
  tcpSocket?: { port: number | string };
  exec?: { command?: string[] };
}
interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  readOnlyRootFilesystem?: boolean;
  allowPrivilegeEscalation?: boolean;
  privileged?: boolean;
  capabilities?: { drop?: string[]; add?: string[] };
  seccompProfile?: { type: string };
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: unknown };
}
interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: SecurityContext;
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  restartPolicy?: string;
  volumes?: { name: string; configMap?: { name: string }; secret?: { secretName: string } }[];
  containers: Container[];
  initContainers?: Container[];
  securityContext?: SecurityContext;
  automountServiceAccountToken?: boolean;
  topologySpreadConstraints?: unknown[];
  affinity?: { podAntiAffinity?: unknown };
}
interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: unknown[];
}
interface NetworkPolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: unknown;
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  spec?: {
    replicas?: number;
    backoffLimit?: number;
    serviceName?: string;
    selector?: LabelSelector;
    template?: { metadata?: { labels?: Record<string, string> }; spec: PodSpec };
    scaleTargetRef?: { kind: string; name: string };
    minReplicas?: number;
    maxReplicas?: number;
    minAvailable?: number | string;
    maxUnavailable?: number | string;
    podSelector?: LabelSelector;
    policyTypes?: string[];
    ingress?: { from?: NetworkPolicyPeer[]; ports?: { port?: number | string }[] }[];
    type?: string;
    tls?: { hosts?: string[]; secretName?: string }[];
    rules?: {
      host?: string;
      http?: {
        paths: { path?: string; backend: { service?: { name: string; port?: { name?: string; number?: number } } } }[];
      };
    }[];
  };
}

const renders = new Map<string, K8sObject[]>();

/** `kubectl kustomize <overlay>` (or a standalone `kustomize build`), parsed into objects. */
function render(overlay: string): K8sObject[] {
  const cached = renders.get(overlay);
  if (cached) return cached;
  const objects = renderDir(join(overlaysDir, overlay));
  renders.set(overlay, objects);
  return objects;
}

/**
 * An overlay with a component added, as an operator enables one (kustomize wants relative paths).
 * `namespace` is the overlay's: objects a component generates get it as they would inside the overlay.
 */
function renderWithComponent(overlay: string, component: string, namespace?: string): K8sObject[] {
  const dir = mkdtempSync(join(tmpdir(), 'kustomize-'));
  try {
    const k8sDir = relative(dir, join(repoRoot, 'deploy', 'k8s'));
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [${k8sDir}/overlays/${overlay}]\ncomponents: [${k8sDir}/components/${component}]\n${namespace ? `namespace: ${namespace}\n` : ''}`,
    );
    return renderDir(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function renderDir(dir: string): K8sObject[] {
  const [command, args] = kustomizeCommand()(dir);
  const output = execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(output)) {
    if (doc.errors.length > 0) throw doc.errors[0];
    const value = doc.toJS() as K8sObject | null;
    if (value) objects.push(value);
  }
  return objects;
}

type ModelClass = new (data: unknown) => { validate(): void };
type ModelGroup = Record<string, ModelClass>;

/** The kubernetes-models class for an apiVersion and kind: `apps/v1` -> k8s.apps.v1, `v1` -> k8s.v1. */
function modelFor(apiVersion: string, kind: string): ModelClass | undefined {
  const registry = k8s as unknown as Record<string, Record<string, ModelGroup> | ModelGroup>;
  const slash = apiVersion.indexOf('/');
  if (slash < 0) return (registry[apiVersion] as ModelGroup | undefined)?.[kind];
  const group = apiVersion
    .slice(0, slash)
    .split('.')
    .map((part, i) => (i === 0 ? part : part.charAt(0).toUpperCase() + part.slice(1)))
    .join('');
  const versions = registry[group] as Record<string, ModelGroup> | undefined;
  return versions?.[apiVersion.slice(slash + 1)]?.[kind];
}

// A Job runs to its end: the same pod rules, but no probes.
const workloadKinds = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'Job']);
const workloads = (objects: K8sObject[]) => objects.filter((o) => workloadKinds.has(o.kind));
const byKind = (objects: K8sObject[], kind: string) => objects.filter((o) => o.kind === kind);
function one(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name} in the rendered output`);
  return found;
}
function podSpec(workload: K8sObject): PodSpec {
  const spec = workload.spec?.template?.spec;
  if (!spec) throw new Error(`${workload.kind}/${workload.metadata.name} has no pod template`);
  return spec;
}
const allContainers = (spec: PodSpec) => [...spec.containers, ...(spec.initContainers ?? [])];
function selects(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  return Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}
/** A URL carrying credentials (`scheme://user:pass@host`). */
const credentialUrl = /:\/\/[^/\s:@]+:[^/\s@]+@/;
const secretLikeName = /TOKEN|PASSWORD|SECRET|_URL$/;

// Every test below renders: without kubectl or kustomize the file fails once, saying which to install.
beforeAll(() => {
  kustomizeCommand();
});

it('finds the staging and production overlays', () => {
  expect(overlays).toEqual(expect.arrayContaining(['production', 'staging']));
});

describe.each(overlays)('overlay %s', (overlay) => {
  it('renders and every object is valid against the Kubernetes schemas', () => {
    const objects = render(overlay);
    expect(objects.length).toBeGreaterThan(0);
    for (const object of objects) {
      const id = `${object.apiVersion} ${object.kind}/${object.metadata?.name}`;
      const Model = modelFor(object.apiVersion, object.kind);
      expect(Model, `no schema for ${id}`).toBeDefined();
      expect(() => new (Model as ModelClass)(object).validate(), id).not.toThrow();
    }
  });

  it('puts every object in one namespace, which enforces the restricted Pod Security Standard', () => {
    const objects = render(overlay);
    const namespaces = byKind(objects, 'Namespace');
    expect(namespaces).toHaveLength(1);
    const ns = namespaces[0]!;
    expect(ns.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    for (const object of objects.filter((o) => o.kind !== 'Namespace')) {
      expect(object.metadata.namespace, `${object.kind}/${object.metadata.name}`).toBe(ns.metadata.name);
    }
  });

  it('gives every container liveness and readiness probes; the apps probe /healthz and /readyz', () => {
    for (const workload of workloads(render(overlay)).filter((w) => w.kind !== 'Job')) {
      for (const container of podSpec(workload).containers) {
        const id = `${workload.metadata.name}/${container.name}`;
        expect(container.livenessProbe, `${id} livenessProbe`).toBeDefined();
        expect(container.readinessProbe, `${id} readinessProbe`).toBeDefined();
      }
    }
    for (const app of APPS) {
      const container = podSpec(one(render(overlay), 'Deployment', app)).containers[0]!;
      expect(container.livenessProbe?.httpGet?.path).toBe('/healthz');
      expect(container.readinessProbe?.httpGet?.path).toBe('/readyz');
    }
  });

  it('runs every pod restricted: non-root, read-only root, no privilege escalation, no capabilities, seccomp', () => {
    for (const workload of workloads(render(overlay))) {
      const spec = podSpec(workload);
      const pod = spec.securityContext ?? {};
      expect(spec.automountServiceAccountToken, `${workload.metadata.name} automountServiceAccountToken`).toBe(false);
      for (const container of allContainers(spec)) {
        const id = `${workload.metadata.name}/${container.name}`;
        const sc = container.securityContext ?? {};
        expect(sc.runAsNonRoot ?? pod.runAsNonRoot, `${id} runAsNonRoot`).toBe(true);
        expect(sc.runAsUser ?? pod.runAsUser, `${id} runAsUser`).toBeGreaterThan(0);
        expect((sc.seccompProfile ?? pod.seccompProfile)?.type, `${id} seccompProfile`).toBe('RuntimeDefault');
        expect(sc.readOnlyRootFilesystem, `${id} readOnlyRootFilesystem`).toBe(true);
        expect(sc.allowPrivilegeEscalation, `${id} allowPrivilegeEscalation`).toBe(false);
        expect(sc.privileged ?? false, `${id} privileged`).toBe(false);
        expect(sc.capabilities?.drop, `${id} capabilities.drop`).toContain('ALL');
        expect(sc.capabilities?.add ?? [], `${id} capabilities.add`).toEqual([]);
      }
      // The app images run as the node user (uid 1000).
      if ((APPS as readonly string[]).includes(workload.metadata.name)) expect(pod.runAsUser).toBe(1000);
    }
  });

  it('sets cpu and memory requests and limits on every container', () => {
    for (const workload of workloads(render(overlay))) {
      for (const container of allContainers(podSpec(workload))) {
        const id = `${workload.metadata.name}/${container.name}`;
        for (const kind of ['requests', 'limits'] as const) {
          expect(container.resources?.[kind]?.cpu, `${id} ${kind}.cpu`).toBeTruthy();
          expect(container.resources?.[kind]?.memory, `${id} ${kind}.memory`).toBeTruthy();
        }
      }
    }
  });

  it('pins every image to a tag other than latest', () => {
    for (const workload of workloads(render(overlay))) {
      for (const container of allContainers(podSpec(workload))) {
        const image = container.image ?? '';
        const ref = image.slice(image.lastIndexOf('/') + 1);
        const pinned = ref.includes('@sha256:') || (ref.includes(':') && !ref.endsWith(':latest'));
        expect(pinned, `${workload.metadata.name}/${container.name} image ${image}`).toBe(true);
      }
    }
  });

  it('denies ingress by default and admits pets traffic from gateway pods only, on 8090 (metrics: monitoring, 9465)', () => {
    const policies = byKind(render(overlay), 'NetworkPolicy');
    const isIngress = (p: K8sObject) => (p.spec?.policyTypes ?? ['Ingress']).includes('Ingress');
    const defaultDeny = policies.find(
      (p) => isIngress(p) && Object.keys(p.spec?.podSelector ?? {}).length === 0 && !p.spec?.ingress?.length,
    );
    expect(defaultDeny, 'a default-deny ingress NetworkPolicy').toBeDefined();

    const petsLabels = one(render(overlay), 'Deployment', 'pets').spec?.template?.metadata?.labels ?? {};
    const forPets = policies.filter((p) => isIngress(p) && selects(p.spec?.podSelector, petsLabels));
    const rules = forPets.flatMap((p) => p.spec?.ingress ?? []);
    expect(rules.length).toBeGreaterThan(0);
    for (const rule of rules) {
      expect(rule.from, 'every pets ingress rule names its sources').toBeDefined();
      const ports = rule.ports?.map((p) => p.port);
      // The API from gateway pods, the metrics from the monitoring namespace; nothing else.
      const [peer, port] =
        ports?.[0] === 9465
          ? [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }, 9465]
          : [{ podSelector: { matchLabels: { app: 'gateway' } } }, 8090];
      for (const from of rule.from ?? []) expect(from).toEqual(peer);
      expect(ports).toEqual([port]);
    }
  });

  it.each([
    { app: 'gateway', port: 9464 },
    { app: 'pets', port: 9465 },
  ])('serves $app metrics on a named port $port, admitted from the monitoring namespace only', ({ app, port }) => {
    const objects = render(overlay);
    const deployment = one(objects, 'Deployment', app);
    const container = podSpec(deployment).containers[0] as Container & {
      ports?: { name?: string; containerPort: number }[];
      envFrom?: { configMapRef?: { name: string } }[];
    };
    expect(container.ports).toEqual(expect.arrayContaining([{ name: 'metrics', containerPort: port }]));
    const service = one(objects, 'Service', app) as K8sObject & {
      spec: { ports?: { name?: string; port: number; targetPort?: string | number }[] };
    };
    expect(service.spec.ports).toEqual(expect.arrayContaining([{ name: 'metrics', port, targetPort: 'metrics' }]));
    const configName = container.envFrom?.[0]?.configMapRef?.name ?? '';
    expect(one(objects, 'ConfigMap', configName).data).toMatchObject({
      METRICS_HOST: '0.0.0.0',
      METRICS_PORT: String(port),
    });
    const labels = deployment.spec?.template?.metadata?.labels ?? {};
    const rules = byKind(objects, 'NetworkPolicy')
      .filter((p) => selects(p.spec?.podSelector, labels))
      .flatMap((p) => p.spec?.ingress ?? []);
    const admitting = rules.filter((r) => !r.ports || r.ports.some((p) => p.port === port || p.port === 'metrics'));
    expect(admitting).toHaveLength(1);
    expect(admitting[0]?.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ]);
  });

  it('exposes only the gateway: pets is a ClusterIP Service and every Ingress routes to the gateway', () => {
    const objects = render(overlay);
    expect(one(objects, 'Service', 'pets').spec?.type ?? 'ClusterIP').toBe('ClusterIP');
    for (const service of byKind(objects, 'Service')) {
      expect(service.spec?.type ?? 'ClusterIP', `Service/${service.metadata.name}`).toBe('ClusterIP');
    }
    const ingresses = byKind(objects, 'Ingress');
    expect(ingresses.length).toBeGreaterThan(0);
    for (const ingress of ingresses) {
      const hosts = (ingress.spec?.rules ?? []).map((r) => r.host);
      const tlsHosts = (ingress.spec?.tls ?? []).flatMap((t) => t.hosts ?? []);
      expect(tlsHosts).toEqual(expect.arrayContaining(hosts));
      for (const tls of ingress.spec?.tls ?? []) expect(tls.secretName).toBeTruthy();
      for (const rule of ingress.spec?.rules ?? []) {
        for (const path of rule.http?.paths ?? []) expect(path.backend.service?.name).toBe('gateway');
      }
    }
  });

  it('routes the portal (8082) on a host of its own with TLS, and keeps the admin API (8081) off every path in', () => {
    const objects = render(overlay);
    const deployment = one(objects, 'Deployment', 'gateway');
    const container = podSpec(deployment).containers[0] as Container & {
      ports?: { name?: string; containerPort: number }[];
      envFrom?: { configMapRef?: { name: string } }[];
    };
    expect(container.ports).toEqual(expect.arrayContaining([{ name: 'portal', containerPort: 8082 }]));
    const service = one(objects, 'Service', 'gateway') as K8sObject & {
      spec: { ports?: { name?: string; port: number; targetPort?: string | number }[] };
    };
    expect(service.spec.ports).toEqual(expect.arrayContaining([{ name: 'portal', port: 8082, targetPort: 'portal' }]));

    // The Ingress: the portal's paths go to the portal port on a host the API's paths do not share.
    const rules = byKind(objects, 'Ingress').flatMap((i) => i.spec?.rules ?? []);
    const portalRules = rules.filter((r) =>
      (r.http?.paths ?? []).some((p) => p.backend.service?.port?.name === 'portal'),
    );
    expect(portalRules).toHaveLength(1);
    const portalRule = portalRules[0]!;
    expect((portalRule.http?.paths ?? []).map((p) => [p.path, p.backend.service?.port?.name])).toEqual([
      ['/portal', 'portal'],
    ]);
    const apiHosts = rules.filter((r) => r !== portalRule).map((r) => r.host);
    expect(apiHosts).not.toContain(portalRule.host);
    const tls = byKind(objects, 'Ingress').flatMap((i) => i.spec?.tls ?? []);
    expect(tls.find((t) => t.hosts?.includes(portalRule.host ?? ''))?.secretName).toBeTruthy();

    // The portal's sign-in links are built on that host over https, and the gateway accepts the settings.
    const config = one(objects, 'ConfigMap', container.envFrom?.[0]?.configMapRef?.name ?? '').data ?? {};
    expect(config).toMatchObject({ PORTAL_HOST: '0.0.0.0', PORTAL_PORT: '8082', ADMIN_HOST: '127.0.0.1' });
    expect(config.PORTAL_URL).toBe(`https://${portalRule.host}`);
    const gateway = loadConfig({
      ...config,
      REDIS_URL: 'redis://r:6379',
      MONGO_URL: 'mongodb://m:27017',
      ADMIN_TOKEN: 'x'.repeat(32),
    });
    expect([gateway.portalUrl, gateway.portalPort]).toEqual([`https://${portalRule.host}`, 8082]);

    // Admitted from anywhere like the API (the ingress controller); the admin port nowhere.
    const labels = deployment.spec?.template?.metadata?.labels ?? {};
    const admitted = byKind(objects, 'NetworkPolicy')
      .filter((p) => selects(p.spec?.podSelector, labels))
      .flatMap((p) => p.spec?.ingress ?? []);
    const portalRule8082 = admitted.find((r) => r.ports?.some((p) => p.port === 8082 || p.port === 'portal'));
    expect(portalRule8082?.from).toBeUndefined();
    expect(portalRule8082?.ports?.map((p) => p.port)).toEqual(expect.arrayContaining([8080, 8082]));
    for (const rule of admitted) {
      expect(rule.ports, 'every gateway ingress rule names its ports').toBeDefined();
      for (const port of rule.ports ?? []) expect([8081, 'admin']).not.toContain(port.port);
    }
    expect(container.ports?.map((p) => p.containerPort)).not.toContain(8081);
    for (const svc of byKind(objects, 'Service')) {
      const ports = (svc as typeof service).spec.ports ?? [];
      expect(
        ports.flatMap((p) => [p.port, p.targetPort]),
        `Service/${svc.metadata.name}`,
      ).not.toContain(8081);
    }
  });

  it('keeps secrets out of the manifests: no Secret data, no credentials in env values or ConfigMaps', () => {
    const objects = render(overlay);
    for (const secret of byKind(objects, 'Secret')) {
      expect(secret.data ?? {}, `Secret/${secret.metadata.name} data`).toEqual({});
      expect(secret.stringData ?? {}, `Secret/${secret.metadata.name} stringData`).toEqual({});
    }
    for (const configMap of byKind(objects, 'ConfigMap')) {
      for (const [key, value] of Object.entries(configMap.data ?? {})) {
        expect(key, `ConfigMap/${configMap.metadata.name}`).not.toMatch(/TOKEN|PASSWORD|SECRET|REDIS_URL|MONGO_URL/);
        expect(value, `ConfigMap/${configMap.metadata.name} ${key}`).not.toMatch(credentialUrl);
      }
    }
    for (const workload of workloads(objects)) {
      for (const container of allContainers(podSpec(workload))) {
        for (const env of container.env ?? []) {
          if (env.value === undefined) continue;
          const id = `${workload.metadata.name}/${container.name} env ${env.name}`;
          expect(env.value, id).not.toMatch(credentialUrl);
          if (secretLikeName.test(env.name) && !env.name.endsWith('_URL')) expect.fail(`${id} is a literal value`);
        }
      }
    }
  });

  it('takes the data-store URLs and the admin token from Secrets', () => {
    const fromSecret = (app: string, name: string) =>
      podSpec(one(render(overlay), 'Deployment', app)).containers[0]!.env?.find((e) => e.name === name)?.valueFrom
        ?.secretKeyRef?.name;
    expect(fromSecret('gateway', 'REDIS_URL')).toBe('gateway-secrets');
    expect(fromSecret('gateway', 'MONGO_URL')).toBe('gateway-secrets');
    expect(fromSecret('gateway', 'ADMIN_TOKEN')).toBe('gateway-secrets');
    expect(fromSecret('pets', 'MONGO_URL')).toBe('pets-secrets');
  });

  // The services only check their indexes at start: without the migration they refuse to start.
  it('runs the MongoDB migration of every Deployment that uses MONGO_URL: its image, its Secret, once', () => {
    const objects = render(overlay);
    const job = one(objects, 'Job', 'migrate');
    const spec = podSpec(job);
    expect(spec.restartPolicy).toBe('Never');
    expect(job.spec?.backoffLimit).toBeGreaterThan(0);
    const mongoUsers = byKind(objects, 'Deployment').filter((d) =>
      podSpec(d).containers.some((c) => c.env?.some((e) => e.name === 'MONGO_URL')),
    );
    expect(mongoUsers.map((d) => d.metadata.name).sort()).toEqual([...APPS].sort());
    for (const deployment of mongoUsers) {
      const app = deployment.metadata.name;
      const container = podSpec(deployment).containers[0]!;
      const url = container.env?.find((e) => e.name === 'MONGO_URL')?.valueFrom?.secretKeyRef;
      const migration = spec.containers.find((c) => c.image === container.image);
      expect(migration, `a migrate container with ${app}'s image ${container.image}`).toBeDefined();
      expect(migration?.env?.find((e) => e.name === 'MONGO_URL')?.valueFrom?.secretKeyRef).toEqual(url);
      expect([...(migration?.command ?? []), ...(migration?.args ?? [])]).toEqual([
        'node',
        `services/${app}/dist/server.js`,
        'migrate',
      ]);
    }
    // Its pods reach MongoDB (port 27017) and DNS (53, every pod), nothing else; nothing reaches them.
    const labels = job.spec?.template?.metadata?.labels ?? {};
    const policies = byKind(objects, 'NetworkPolicy').filter((p) => selects(p.spec?.podSelector, labels));
    const egress = policies.flatMap((p) => (p.spec as { egress?: { ports?: { port?: number }[] }[] }).egress ?? []);
    expect(new Set(egress.flatMap((rule) => rule.ports?.map((p) => p.port) ?? []))).toEqual(new Set([53, 27017]));
    expect(policies.flatMap((p) => p.spec?.ingress ?? [])).toEqual([]);
    // An in-cluster MongoDB admits the migration as it admits the services.
    const mongo = objects.find((o) => o.kind === 'StatefulSet' && o.metadata.name === 'mongo');
    if (mongo) {
      const mongoLabels = mongo.spec?.template?.metadata?.labels ?? {};
      const admitted = byKind(objects, 'NetworkPolicy')
        .filter((p) => selects(p.spec?.podSelector, mongoLabels))
        .flatMap((p) => p.spec?.ingress ?? [])
        .flatMap((rule) => rule.from ?? []);
      expect(admitted.some((peer) => selects(peer.podSelector, labels))).toBe(true);
    }
  });

  it('gives each service an HPA (autoscaling/v2) and a PodDisruptionBudget that match its pods', () => {
    const objects = render(overlay);
    for (const app of APPS) {
      const deployment = one(objects, 'Deployment', app);
      const labels = deployment.spec?.template?.metadata?.labels ?? {};
      const hpa = byKind(objects, 'HorizontalPodAutoscaler').find(
        (h) => h.spec?.scaleTargetRef?.kind === 'Deployment' && h.spec.scaleTargetRef.name === app,
      );
      expect(hpa, `HPA for ${app}`).toBeDefined();
      expect(hpa?.apiVersion).toBe('autoscaling/v2');
      expect(hpa?.spec?.maxReplicas).toBeGreaterThanOrEqual(hpa?.spec?.minReplicas ?? 1);
      const pdb = byKind(objects, 'PodDisruptionBudget').find((p) => selects(p.spec?.selector, labels));
      expect(pdb, `PodDisruptionBudget for ${app}`).toBeDefined();
    }
  });
});

describe('production against staging', () => {
  const has = (name: string) => overlays.includes(name);

  it.runIf(has('staging'))('staging runs MongoDB as a one-member replica set, initiated before the migration', () => {
    const objects = render('staging');
    const mongo = one(objects, 'StatefulSet', 'mongo');
    expect(mongo.spec?.replicas).toBe(1);
    const args = podSpec(mongo).containers[0]?.args ?? [];
    expect(args[args.indexOf('--replSet') + 1]).toBe('rs0');
    // The init step: an init container of the migrate Job, on the StatefulSet pod's stable name.
    const init = podSpec(one(objects, 'Job', 'migrate')).initContainers ?? [];
    expect(init.map((c) => c.name)).toEqual(['mongo-replica-set']);
    const script = [...(init[0]?.command ?? []), ...(init[0]?.args ?? [])].join(' ');
    const member = `mongo-0.${mongo.spec?.serviceName}:27017`;
    expect(script).toContain(`rs.initiate({ _id: 'rs0', members: [{ _id: 0, host: '${member}' }] })`);
    expect(script).toContain(`mongodb://${member}/?directConnection=true`);
    // Run again it changes nothing: it initiates only a set not yet initiated.
    expect(script).toContain("if (e.codeName !== 'NotYetInitialized') throw e;");
  });

  it.runIf(has('production') && has('staging'))('runs more replicas and a higher HPA floor in production', () => {
    for (const app of APPS) {
      const prod = render('production');
      const staging = render('staging');
      expect(one(prod, 'Deployment', app).spec?.replicas).toBeGreaterThan(
        one(staging, 'Deployment', app).spec?.replicas ?? 1,
      );
      expect(one(prod, 'HorizontalPodAutoscaler', app).spec?.minReplicas).toBeGreaterThan(
        one(staging, 'HorizontalPodAutoscaler', app).spec?.minReplicas ?? 1,
      );
      expect(one(prod, 'HorizontalPodAutoscaler', app).spec?.maxReplicas).toBeGreaterThan(
        one(staging, 'HorizontalPodAutoscaler', app).spec?.maxReplicas ?? 1,
      );
    }
  });

  it.runIf(has('production'))('runs at least 3 gateways, spread across nodes, with a minAvailable budget', () => {
    const prod = render('production');
    expect(one(prod, 'Deployment', 'gateway').spec?.replicas).toBeGreaterThanOrEqual(3);
    for (const app of APPS) {
      const spec = podSpec(one(prod, 'Deployment', app));
      expect(spec.topologySpreadConstraints?.length || spec.affinity?.podAntiAffinity, `${app} spread`).toBeTruthy();
      expect(one(prod, 'PodDisruptionBudget', app).spec?.minAvailable).toBeGreaterThanOrEqual(2);
    }
  });

  it.runIf(has('production') && has('staging'))('serves each environment on its own hosts, API and portal', () => {
    const hosts = (overlay: string) => one(render(overlay), 'Ingress', 'gateway').spec?.rules?.map((r) => r.host);
    expect(hosts('production')).toEqual(['api.animal-store.example', 'portal.animal-store.example']);
    expect(hosts('staging')).toEqual(['staging-api.animal-store.example', 'staging-portal.animal-store.example']);
  });
});

describe.runIf(overlays.includes('production'))('production on Redis Sentinel or Cluster (components)', () => {
  /** The gateway's environment once Kubernetes resolved it, with `secrets` as gateway-secrets' data. */
  function gatewayEnv(objects: K8sObject[], secrets: Record<string, string>): Record<string, string> {
    const env: Record<string, string> = { NODE_ENV: 'production' };
    for (const e of podSpec(one(objects, 'Deployment', 'gateway')).containers[0]?.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      const value = ref ? (ref.name === 'gateway-secrets' ? secrets[ref.key] : undefined) : e.value;
      if (value !== undefined) env[e.name] = value;
    }
    return env;
  }

  it.each([
    [
      'redis-sentinel',
      'sentinel',
      { 'redis-sentinels': 's1:26379,s2:26379,s3:26379', 'redis-sentinel-master': 'limits' },
    ],
    ['redis-cluster', 'cluster', { 'redis-cluster-nodes': 'redis.example:6379' }],
  ] as const)(
    '%s replaces REDIS_URL with the %s settings from gateway-secrets, with TLS and optional credentials',
    (component, mode, keys) => {
      const objects = renderWithComponent('production', component);
      for (const object of objects) {
        const Model = modelFor(object.apiVersion, object.kind);
        if (Model) new Model(object).validate();
      }
      const secrets = { 'mongo-url': 'mongodb://m:27017', 'admin-token': 'x'.repeat(32), ...keys };
      const env = gatewayEnv(objects, secrets);
      expect(env.REDIS_URL).toBeUndefined();
      expect(env.REDIS_TLS).toBe('true');
      // The gateway starts on it: exactly one Redis mode, and without credentials (they are optional).
      expect(loadConfig(env).redis?.mode).toBe(mode);
      const withAuth = loadConfig(gatewayEnv(objects, { ...secrets, 'redis-username': 'gw', 'redis-password': 'pw' }));
      expect(withAuth.redis).toMatchObject({ auth: { username: 'gw', password: 'pw', tls: true } });
    },
  );
});

describe.runIf(overlays.includes('production'))('plans as data (component plans-file)', () => {
  it('mounts the plans ConfigMap where PLANS_FILE points, and the gateway accepts its plans', () => {
    const objects = renderWithComponent('production', 'plans-file', 'animal-store');
    for (const object of objects) {
      const Model = modelFor(object.apiVersion, object.kind);
      if (Model) new Model(object).validate();
    }
    const spec = podSpec(one(objects, 'Deployment', 'gateway'));
    const container = spec.containers[0];
    const plansFile = container?.env?.find((e) => e.name === 'PLANS_FILE')?.value as string;
    const mount = container?.volumeMounts?.find((m) => plansFile.startsWith(`${m.mountPath}/`));
    const volume = spec.volumes?.find((v) => v.name === mount?.name);
    const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === volume?.configMap?.name);
    const text = configMap?.data?.[plansFile.slice((mount?.mountPath.length ?? 0) + 1)];
    expect(text, 'the ConfigMap holds the file PLANS_FILE names').toBeDefined();
    const book = parsePlansFile(text as string, 'plans.json', false);
    expect(book, JSON.stringify(book)).not.toBeInstanceOf(Array);
  });
});

describe.runIf(overlays.includes('production'))('regions over NATS JetStream (component regions)', () => {
  it('runs a NATS cluster of three with JetStream beside the gateway, which starts on it in its region', () => {
    const objects = renderWithComponent('production', 'regions', 'animal-store');
    for (const object of objects) {
      const Model = modelFor(object.apiVersion, object.kind);
      if (Model) new Model(object).validate();
    }
    const nats = one(objects, 'StatefulSet', 'nats') as K8sObject & { spec?: { replicas?: number } };
    expect(nats.spec?.replicas).toBe(3);
    const env = Object.fromEntries(
      (podSpec(one(objects, 'Deployment', 'gateway')).containers[0]?.env ?? []).flatMap((e) =>
        e.value === undefined ? [] : [[e.name, e.value]],
      ),
    );
    expect([env.NATS_URL, env.REGION]).toEqual(['nats://nats:4222', 'eu']);
    const config = loadConfig({
      NODE_ENV: 'production',
      ADMIN_TOKEN: 'x'.repeat(32),
      REDIS_URL: 'redis://redis:6379',
      MONGO_URL: 'mongodb://m:27017',
      NATS_URL: env.NATS_URL,
      REGION: env.REGION,
    });
    expect(config.regions).toMatchObject({ natsUrl: 'nats://nats:4222', region: 'eu' });

    // The config the pods mount, as nats-server reads it (server_name from the pod's name).
    const volume = podSpec(nats).volumes?.find((v) => v.name === 'config');
    const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === volume?.configMap?.name);
    const text = configMap?.data?.['nats.conf'];
    expect(text, 'the mounted ConfigMap holds nats.conf').toMatch(/^gateway \{/m);
    const dir = mkdtempSync(join(tmpdir(), 'nats-conf-'));
    try {
      writeFileSync(join(dir, 'nats.conf'), text as string);
      const checked = spawnSync('nats-server', ['-t', '-c', join(dir, 'nats.conf')], {
        encoding: 'utf8',
        env: { ...process.env, POD_NAME: 'nats-0' },
      });
      expect(checked.error, 'nats-server must be on PATH (apt-get install nats-server)').toBeUndefined();
      expect(`${checked.stdout}${checked.stderr}`).toContain('is valid');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
