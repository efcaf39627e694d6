/**
 * The Kubernetes examples (README "Kubernetes") are run, so they cannot rot. Each pod's file
 * system is rebuilt from its volumes: the ConfigMap's files, the Secrets the header's `kubectl
 * create secret` commands create, the claim. The proxy's command line then passes what
 * `agent-auth-proxy check` checks, boots, and answers its probes. sidecar.yaml is the small
 * install (one replica on SQLite); sidecar-postgres.yaml is several replicas on PostgreSQL.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy } from '../../src/app.js';
import { checkSettings } from '../../src/check.js';
import { DB_PASSWORD_ENV, isPostgresUrl } from '../../src/config/database.js';
import { parseDuration } from '../../src/config/durations.js';
import { ENV } from '../../src/config/secrets.js';
import { parseConfig } from '../../src/config/config-file.js';
import { resolveSettings, type CliOverrides } from '../../src/config/settings.js';
import { silentLogger } from '../../src/log.js';
import { getJson, ROOT, tempDbFile } from '../helpers/proxy.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { connectionsPerReplica } from '../../src/storage/pg-pool.js';

type Manifest = Record<string, any>;

const DIR = 'examples/kubernetes';
const SQLITE = 'sidecar.yaml';
const POSTGRES = 'sidecar-postgres.yaml';
/** PostgreSQL's default max_connections, less its superuser_reserved_connections. */
const SERVER_CONNECTIONS = 100 - 3;

interface Pod {
  readonly text: string;
  readonly docs: readonly Manifest[];
  readonly deployment: Manifest;
  readonly proxy: Manifest;
  /** The proxy's config in its pod's file system, which lies under `root`. */
  readonly config: Manifest;
  readonly root: string;
  /** The container's environment, each secret a stand-in value. */
  readonly env: Readonly<Record<string, string>>;
  /** The proxy's command line, its paths in `root`. */
  readonly cli: CliOverrides;
}

const roots: string[] = [];
let postgres: TestPostgres | undefined;
afterAll(async () => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
  await postgres?.stop();
});

/** The Secrets and their keys that the header's `kubectl create secret generic` commands create. */
function secretsCreated(text: string): Map<string, Set<string>> {
  const secrets = new Map<string, Set<string>>();
  let current: Set<string> | undefined;
  for (const line of text.split('\n').filter((l) => l.startsWith('#'))) {
    const created = /kubectl create secret generic ([\w.-]+)/.exec(line);
    if (created) secrets.set(created[1] as string, (current = new Set()));
    const key = /--from-literal=([\w.-]+)=/.exec(line);
    if (key) current?.add(key[1] as string);
  }
  return secrets;
}

const standIn = (secret: string, key: string): string => `${secret}-${key}-0123456789abcdef`;

/** Reads an example and lays out its proxy container's mounts under a fresh directory. */
function podOf(name: string): Pod {
  const text = readFileSync(join(ROOT, DIR, name), 'utf8');
  const docs = parseAllDocuments(text).map((d) => d.toJS() as Manifest);
  const deployment = docs.find((d) => d.kind === 'Deployment') as Manifest;
  const spec = deployment.spec.template.spec;
  const proxy = spec.containers.find((c: Manifest) => c.name === 'agent-auth-proxy');
  const secrets = secretsCreated(text);
  const root = mkdtempSync(join(tmpdir(), 'aap-k8s-'));
  roots.push(root);
  const mounts = (proxy.volumeMounts as Manifest[]).map((m) => m.mountPath as string);
  // Longest first: /etc/agent-auth-proxy-tokens before /etc/agent-auth-proxy.
  const inPod = new RegExp(
    [...mounts]
      .sort((a, b) => b.length - a.length)
      .map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('|'),
    'g',
  );
  const rooted = (value: string): string => value.replace(inPod, (path) => join(root, path));
  const secretValue = (secret: string, key: string): string => {
    expect(secrets.get(secret), `secret ${secret} is created by the header's kubectl command`).toBeDefined();
    expect([...(secrets.get(secret) ?? [])], `${secret} has the key ${key}`).toContain(key);
    return standIn(secret, key);
  };

  for (const mount of proxy.volumeMounts as Manifest[]) {
    const at = join(root, mount.mountPath as string);
    mkdirSync(at, { recursive: true });
    const volume = (spec.volumes as Manifest[]).find((v) => v.name === mount.name) as Manifest;
    if (volume.configMap) {
      const map = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === volume.configMap.name);
      for (const [file, content] of Object.entries(map?.data as Record<string, string>))
        writeFileSync(join(at, file), rooted(content));
    } else if (volume.secret) {
      const secret = volume.secret.secretName as string;
      for (const key of secrets.get(secret) ?? []) writeFileSync(join(at, key), secretValue(secret, key));
    } else {
      expect(Object.keys(volume)).toEqual(['name', 'persistentVolumeClaim']);
    }
  }
  const env = Object.fromEntries(
    ((proxy.env ?? []) as Manifest[]).map((e) => {
      const ref = e.valueFrom?.secretKeyRef;
      return [e.name as string, ref ? secretValue(ref.name, ref.key) : (e.value as string)];
    }),
  );
  const args = proxy.args as string[];
  expect(args.slice(0, 2)).toEqual(['serve', '--config']);
  expect(args).toHaveLength(3);
  const configMount = (spec.volumes as Manifest[]).find((v) => v.configMap)?.configMap.name;
  const configText = docs.find((d) => d.metadata.name === configMount)?.data['proxy.yaml'] as string;
  const config = parseConfig(configText, `${name}#proxy.yaml`);
  return { text, docs, deployment, proxy, config, root, env, cli: { config: rooted(args[2] as string) } };
}

/** Each example's pod, laid out once, by the first test that needs it. */
const pods = new Map<string, Pod>();
const podFor = (name: string): Pod => {
  if (!pods.has(name)) pods.set(name, podOf(name));
  return pods.get(name) as Pod;
};

it(`every example in ${DIR}/ is tested here`, () => {
  expect(readdirSync(join(ROOT, DIR)).sort()).toEqual([POSTGRES, SQLITE]);
});

describe.each([SQLITE, POSTGRES])(`${DIR}/%s`, (name) => {
  let pod: Pod;
  beforeAll(() => {
    pod = podFor(name);
  });
  const spec = (): Manifest => pod.deployment.spec.template.spec as Manifest;
  const portNamed = (port: string | number): number =>
    typeof port === 'number'
      ? port
      : (pod.proxy.ports.find((p: Manifest) => p.name === port)?.containerPort as number);

  it('its proxy passes check in the pod: config, secrets from the mounts, document and policy', async () => {
    const settings = resolveSettings(pod.cli, pod.root, pod.env);
    const report = await checkSettings(settings);
    expect(report).toMatchObject({ apis: 1, capabilities: 1, warnings: [] });
    expect(settings.issuer).toBe('https://agents.example.com');
    expect(settings.adminToken).toBe(standIn('agent-auth-proxy-tokens', 'admin-token'));
    expect(settings.apis[0]?.execution.credentials).toEqual({
      legacyKey: { kind: 'secret', value: standIn('agent-auth-proxy-tokens', 'legacy-api-key') },
    });
  });

  it('keeps secrets out of the manifest: tokens, keys and the database password come from Secrets', () => {
    // No URL with a password anywhere; the proxy's secret variables only ever from a Secret.
    expect(pod.text).not.toMatch(/postgres(ql)?:\/\/[^\s/@]*:[^\s/@]*@/i);
    for (const e of (pod.proxy.env ?? []) as Manifest[]) {
      if ([DB_PASSWORD_ENV, ENV.adminToken, ENV.introspectionToken].includes(e.name))
        expect(e, e.name).toMatchObject({ valueFrom: { secretKeyRef: {} } });
    }
    expect(pod.config.postgres.password_file).toBeUndefined();
    expect(pod.text).not.toMatch(/^\s*password:/m);
  });

  it('boots from that config and answers its probes, on the port they name', async () => {
    const settings = resolveSettings(pod.cli, pod.root, pod.env);
    expect(pod.config.server.port).toBe(8080);
    const db = settings.database.kind === 'postgres' ? await testDatabase() : tempDbFile();
    const proxy = await startProxy(
      resolveSettings({ ...pod.cli, host: '127.0.0.1', port: 0, internalPort: 0, db }, pod.root, pod.env),
      { logger: silentLogger },
    );
    try {
      for (const probe of [pod.proxy.readinessProbe, pod.proxy.livenessProbe]) {
        expect(portNamed(probe.httpGet.port)).toBe(pod.config.server.port);
        expect((await getJson(`${proxy.url}${probe.httpGet.path as string}`)).status).toBe(200);
      }
      expect(pod.proxy.readinessProbe.httpGet.path).toBe('/readyz');
      expect(pod.proxy.livenessProbe.httpGet.path).toBe('/healthz');
    } finally {
      await proxy.close();
    }
  });

  it("drains within the pod's termination grace: preStop pause + server.shutdown_grace", () => {
    const preStop = pod.proxy.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe('sleep');
    const grace = parseDuration(pod.config.server.shutdown_grace, 'server.shutdown_grace') / 1000;
    expect(Number(preStop[1]) + grace).toBeLessThan(spec().terminationGracePeriodSeconds);
  });

  it('is scraped on the internal listener, which the Service leaves out', () => {
    const internalPort = pod.config.server.internal_port;
    const annotations = pod.deployment.spec.template.metadata.annotations;
    expect(annotations['prometheus.io/port']).toBe(String(internalPort));
    expect(annotations['prometheus.io/path']).toBe('/metrics');
    expect(pod.proxy.ports).toContainEqual({ name: 'internal', containerPort: internalPort });
    const service = pod.docs.find((d) => d.kind === 'Service');
    expect(service?.spec.ports.map((p: Manifest) => p.targetPort as string)).toEqual(['agent-auth']);
    expect(service?.spec.selector).toEqual(pod.deployment.spec.template.metadata.labels);
  });

  it('runs as non-root on a read-only root file system, with requests and a memory limit', () => {
    expect(spec().securityContext).toMatchObject({ runAsNonRoot: true });
    expect(pod.proxy.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(pod.proxy.resources.requests).toHaveProperty('cpu');
    expect(pod.proxy.resources.limits).toHaveProperty('memory');
  });
});

describe(`${DIR}/${SQLITE}`, () => {
  it('is one replica, replaced with Recreate, its SQLite file on the claim it mounts', () => {
    const pod = podFor(SQLITE);
    const settings = resolveSettings(pod.cli, pod.root, pod.env);
    expect(settings.database.kind).toBe('sqlite');
    expect(pod.deployment.spec.replicas).toBe(1);
    expect(pod.deployment.spec.strategy).toEqual({ type: 'Recreate' });
    const spec = pod.deployment.spec.template.spec;
    const claim = (spec.volumes as Manifest[]).find((v) => v.persistentVolumeClaim);
    const mount = (pod.proxy.volumeMounts as Manifest[]).find((m) => m.name === claim?.name);
    expect(mount?.readOnly).toBeUndefined();
    expect(settings.database.kind === 'sqlite' && dirname(settings.database.file)).toBe(
      join(pod.root, mount?.mountPath as string),
    );
    const pvc = pod.docs.find((d) => d.kind === 'PersistentVolumeClaim');
    expect(pvc?.metadata.name).toBe(claim?.persistentVolumeClaim.claimName);
    expect(pvc?.spec.accessModes).toEqual(['ReadWriteOnce']);
  });
});

describe(`${DIR}/${POSTGRES}`, () => {
  let pod: Pod;
  beforeAll(() => {
    pod = podFor(POSTGRES);
  });

  it('is several replicas on one PostgreSQL, its password from the variable the proxy reads', () => {
    const settings = resolveSettings(pod.cli, pod.root, pod.env);
    expect(settings.database.kind).toBe('postgres');
    expect(pod.deployment.spec.replicas).toBeGreaterThan(1);
    expect(isPostgresUrl(pod.config.database)).toBe(true);
    expect(new URL(pod.config.database).password).toBe('');
    // The URL the proxy connects with carries the password of the Secret the Deployment names.
    const ref = (pod.proxy.env as Manifest[]).find((e) => e.name === DB_PASSWORD_ENV)?.valueFrom.secretKeyRef;
    expect(ref).toEqual({ name: 'agent-auth-proxy-db', key: 'password' });
    const url = settings.database.kind === 'postgres' ? new URL(settings.database.url) : undefined;
    expect(url?.password).toBe(standIn(ref.name, ref.key));
  });

  it('keeps no state in the pod: no claim, every mount read-only', () => {
    expect(pod.docs.filter((d) => d.kind === 'PersistentVolumeClaim')).toEqual([]);
    const spec = pod.deployment.spec.template.spec;
    for (const volume of spec.volumes as Manifest[])
      expect(Object.keys(volume)).not.toContain('persistentVolumeClaim');
    for (const container of spec.containers as Manifest[])
      for (const mount of container.volumeMounts ?? []) expect(mount.readOnly, mount.name).toBe(true);
  });

  it('rolls updates with no pod down, and its pools fit in the server even while it surges', () => {
    const replicas = pod.deployment.spec.replicas as number;
    const strategy = pod.deployment.spec.strategy as Manifest;
    expect(strategy.type).toBe('RollingUpdate');
    expect(strategy.rollingUpdate.maxUnavailable).toBe(0);
    expect(
      (replicas + (strategy.rollingUpdate.maxSurge as number)) *
        connectionsPerReplica(pod.config.postgres.pool_size as number),
    ).toBeLessThanOrEqual(SERVER_CONNECTIONS);
    const budget = pod.docs.find((d) => d.kind === 'PodDisruptionBudget');
    expect(budget?.spec.selector).toEqual(pod.deployment.spec.selector);
    expect(budget?.spec.maxUnavailable).toBeLessThan(replicas);
  });
});

async function testDatabase(): Promise<string> {
  postgres ??= await startPostgres();
  return postgres.createDatabase();
}
