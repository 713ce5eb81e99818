/**
 * The upstream Cluster API core manager (built from its Go module by `build-capi.sh`) run against the local control
 * plane: a serving certificate for its webhook server signed by the control plane's CA, its webhook configurations
 * (from the module's `config/webhook/manifests.yaml`) registered with the API server by URL + caBundle, feature gates
 * from the caller. Ready means: the webhook server answers, the webhooks are registered and every controller has
 * started its workers. Stop removes the webhook registrations FIRST (they are `failurePolicy: Fail`: with the manager
 * gone every write of a Cluster API object would fail), then stops the process.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, ApiException, KubeConfig, loadAllYaml } from '@kubernetes/client-node';
import type { V1MutatingWebhookConfiguration, V1ValidatingWebhookConfiguration } from '@kubernetes/client-node';
import { freePort, pollUntil, spawnChild, stopChild, type Child } from './children.ts';
import { createServingCert } from './pki.ts';

/** Feature gates of the manager; unset gates keep the manager's own defaults (`MachineTaintPropagation` off). */
export type FeatureGates = Readonly<Record<string, boolean>>;

/** Gates turned on unless the caller says otherwise: ClusterClass/topology is what the examples use. */
export const DEFAULT_FEATURE_GATES: FeatureGates = Object.freeze({ ClusterTopology: true });

/** Prefix of the webhook configurations' names (as in the upstream release manifests). */
const WEBHOOK_NAME_PREFIX = 'capi-';

/**
 * Parses `--capi-feature-gates` text: `Name=true,Other=false` (the manager's own `--feature-gates` syntax).
 * Throws an Error quoting the offending entry.
 * @example parseFeatureGates('MachineTaintPropagation=true') // { MachineTaintPropagation: true }
 */
export function parseFeatureGates(text: string): Record<string, boolean> {
  const gates: Record<string, boolean> = {};
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const m = /^([A-Za-z][A-Za-z0-9]*)=(true|false)$/.exec(entry);
    if (!m) throw new Error(`feature gate ${JSON.stringify(entry)} is not Name=true or Name=false`);
    gates[m[1] as string] = m[2] === 'true';
  }
  return gates;
}

/** `--feature-gates` value: defaults, then the caller's gates (sorted, so the command line is stable). */
export function featureGatesArg(gates: FeatureGates): string {
  const merged = { ...DEFAULT_FEATURE_GATES, ...gates };
  return Object.keys(merged)
    .sort()
    .map((k) => `${k}=${String(merged[k])}`)
    .join(',');
}

/** Options of {@link startCapiManager}. */
export interface CapiManagerOptions {
  /** The manager binary. */
  readonly binary: string;
  /** Kubeconfig the manager uses (admin). */
  readonly kubeconfigPath: string;
  /** A folder for its log and webhook certificate (inside the control plane's folder). */
  readonly dir: string;
  /** The control plane's CA: signs the webhook serving certificate, and is the webhooks' caBundle. */
  readonly caCertPath: string;
  readonly caKeyPath: string;
  /** `config/webhook/manifests.yaml` of the same module version. */
  readonly webhookManifest: string;
  readonly featureGates: FeatureGates;
  /** Watch only this namespace (and scope the webhooks to it); default all namespaces. */
  readonly namespace?: string;
  readonly timeoutMs: number;
}

/** A running manager. */
export interface CapiManager {
  /** The effective gates (defaults merged with the caller's). */
  readonly featureGates: FeatureGates;
  readonly namespace: string | undefined;
  readonly logPath: string;
  readonly pid: number | undefined;
  /** `http://127.0.0.1:<port>` of its health endpoints (`/readyz`, `/healthz`). */
  readonly healthEndpoint: string;
  /** `http://127.0.0.1:<port>/metrics` (controller-runtime metrics). */
  readonly metricsEndpoint: string;
  readonly child: Child;
  /** Removes the webhook registrations, then stops the process (SIGTERM; SIGKILL after 10 s). Idempotent. */
  stop(): Promise<void>;
}

/** Controllers whose workers must run before the manager counts as ready (the rest start in the same breath). */
function expectedControllers(gates: FeatureGates): string[] {
  const names = ['cluster', 'machine', 'machineset', 'machinedeployment'];
  const effective = { ...DEFAULT_FEATURE_GATES, ...gates };
  if (effective['MachinePool'] !== false) names.push('machinepool'); // beta, on by default from v1.8 to v1.14
  if (effective['ClusterTopology']) names.push('topology/cluster', 'clusterclass');
  return names;
}

/**
 * Starts the manager and waits until it is ready (see the module comment). `children` receives the process so that
 * the control plane's exit handler kills it with the others. On failure everything it did is undone.
 */
export async function startCapiManager(o: CapiManagerOptions, children: Child[]): Promise<CapiManager> {
  const certDir = join(o.dir, 'webhook-certs');
  await createServingCert({ dir: certDir, caCertPath: o.caCertPath, caKeyPath: o.caKeyPath, commonName: 'cluster-api-webhook' });
  const [webhookPort, healthPort, diagnosticsPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const logPath = join(o.dir, 'cluster-api-manager.log');
  const gatesArg = featureGatesArg(o.featureGates);
  const child = spawnChild('cluster-api-manager', o.binary, [
    `--kubeconfig=${o.kubeconfigPath}`,
    `--feature-gates=${gatesArg}`,
    '--leader-elect=false',
    `--health-addr=127.0.0.1:${healthPort}`,
    `--diagnostics-address=127.0.0.1:${diagnosticsPort}`,
    '--insecure-diagnostics',
    `--webhook-port=${webhookPort}`,
    `--webhook-cert-dir=${certDir}`,
    ...(o.namespace ? [`--namespace=${o.namespace}`] : []),
    '--v=2',
  ], logPath);
  children.push(child);
  const kc = new KubeConfig();
  kc.loadFromFile(o.kubeconfigPath);
  const admission = kc.makeApiClient(AdmissionregistrationV1Api);
  const names = webhookNames(o.webhookManifest);
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await deregisterWebhooks(admission, names);
      await stopChild(child);
      const i = children.indexOf(child);
      if (i >= 0) children.splice(i, 1);
    })();
    return stopping;
  };
  const healthEndpoint = `http://127.0.0.1:${healthPort}`;
  const metricsEndpoint = `http://127.0.0.1:${diagnosticsPort}/metrics`;
  try {
    await pollUntil('the Cluster API manager /readyz (its webhook server)', o.timeoutMs, [child], async () => {
      const res = await fetch(`${healthEndpoint}/readyz`, { signal: AbortSignal.timeout(2000) });
      return res.ok;
    });
    await registerWebhooks(admission, o.webhookManifest, `https://127.0.0.1:${webhookPort}`, readFileSync(o.caCertPath).toString('base64'), o.namespace);
    const expected = expectedControllers(o.featureGates);
    await pollUntil(`the Cluster API controllers (${expected.join(', ')}) to start their workers`, o.timeoutMs, [child], async () => {
      const text = await (await fetch(metricsEndpoint, { signal: AbortSignal.timeout(2000) })).text();
      return expected.every((c) => workersStarted(text, c));
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    featureGates: Object.freeze({ ...DEFAULT_FEATURE_GATES, ...o.featureGates }),
    namespace: o.namespace,
    logPath,
    pid: child.proc.pid,
    healthEndpoint,
    metricsEndpoint,
    child,
    stop,
  };
}

/**
 * True when the controller's `controller_runtime_max_concurrent_reconciles` gauge is set: controller-runtime sets it
 * in `Start`, right before it launches the workers (it is absent while the controller waits for its caches).
 */
function workersStarted(metrics: string, controller: string): boolean {
  const re = new RegExp(`^controller_runtime_max_concurrent_reconciles\\{controller="${controller.replace(/[/.]/g, '\\$&')}"\\} [1-9]`, 'm');
  return re.test(metrics);
}

type WebhookConfiguration = V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration;

function readWebhookConfigurations(manifest: string): WebhookConfiguration[] {
  return loadAllYaml(readFileSync(manifest, 'utf8')).filter(Boolean) as WebhookConfiguration[];
}

function webhookNames(manifest: string): { kind: string; name: string }[] {
  return readWebhookConfigurations(manifest).map((c) => ({ kind: c.kind ?? '', name: `${WEBHOOK_NAME_PREFIX}${c.metadata?.name ?? ''}` }));
}

/** Registers every webhook of the manifest with `url` + `caBundle` instead of an in-cluster Service. */
async function registerWebhooks(api: AdmissionregistrationV1Api, manifest: string, base: string, caBundle: string, namespace: string | undefined): Promise<void> {
  for (const config of readWebhookConfigurations(manifest)) {
    const name = `${WEBHOOK_NAME_PREFIX}${config.metadata?.name ?? ''}`;
    const webhooks = (config.webhooks ?? []).map((w) => {
      const path = w.clientConfig.service?.path ?? '';
      return {
        ...w,
        clientConfig: { url: `${base}${path}`, caBundle },
        ...(namespace ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } : {}),
      };
    });
    const body = { ...config, metadata: { name }, webhooks };
    if (config.kind === 'MutatingWebhookConfiguration') {
      await replaceOrCreate(() => api.createMutatingWebhookConfiguration({ body: body as V1MutatingWebhookConfiguration }), async () => {
        const current = await api.readMutatingWebhookConfiguration({ name });
        await api.replaceMutatingWebhookConfiguration({ name, body: { ...(body as V1MutatingWebhookConfiguration), metadata: { name, resourceVersion: current.metadata?.resourceVersion } } });
      });
    } else if (config.kind === 'ValidatingWebhookConfiguration') {
      await replaceOrCreate(() => api.createValidatingWebhookConfiguration({ body: body as V1ValidatingWebhookConfiguration }), async () => {
        const current = await api.readValidatingWebhookConfiguration({ name });
        await api.replaceValidatingWebhookConfiguration({ name, body: { ...(body as V1ValidatingWebhookConfiguration), metadata: { name, resourceVersion: current.metadata?.resourceVersion } } });
      });
    } else {
      throw new Error(`${manifest}: unexpected kind ${JSON.stringify(config.kind)}`);
    }
  }
}

async function replaceOrCreate(create: () => Promise<unknown>, replace: () => Promise<unknown>): Promise<void> {
  try {
    await create();
  } catch (e) {
    if (!(e instanceof ApiException) || e.code !== 409) throw e;
    await replace(); // left by an earlier manager of this control plane
  }
}

async function deregisterWebhooks(api: AdmissionregistrationV1Api, names: { kind: string; name: string }[]): Promise<void> {
  for (const { kind, name } of names) {
    try {
      if (kind === 'MutatingWebhookConfiguration') await api.deleteMutatingWebhookConfiguration({ name });
      else await api.deleteValidatingWebhookConfiguration({ name });
    } catch (e) {
      if (e instanceof ApiException && e.code === 404) continue;
      // The API server may already be gone (stop on process exit); nothing is left to protect then.
      if (e instanceof ApiException) throw e;
    }
  }
}
