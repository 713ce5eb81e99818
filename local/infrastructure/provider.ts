/**
 * The local Cluster API provider: plays the part the in-memory and Docker providers play in Cluster API's own tests,
 * for the local control plane. Watch-driven (client-node informers; a reconcile runs per changed object, retried
 * with backoff only after an error), never polling.
 *
 * - **LocalCluster** (infrastructure): `spec.controlPlaneEndpoint` = the API server holding the Cluster's Nodes,
 *   `status.initialization.provisioned=true`, and the Cluster's `<name>-kubeconfig` Secret (type
 *   `cluster.x-k8s.io/secret`, key `value`, label `cluster.x-k8s.io/cluster-name`), removed with the LocalCluster.
 * - **LocalMachine** (infrastructure): once Cluster API has made a Machine its owner, registers a **Node named like
 *   the Machine** as a kubelet would: `spec.providerID`, the `spec.startupTaints` it asks for, then through `/status`
 *   Ready=True and MemoryPressure/DiskPressure/PIDPressure=False; then `spec.providerID` and
 *   `status.initialization.provisioned=true` on the LocalMachine. A finalizer deletes the Node with it. With
 *   `spec.bootSeconds` > 0 the order is a cloud's: the machine is provisioned first (its provider ID known, so Cluster
 *   API copies it to the Machine), and its Node registers that many seconds later, as an instance boots.
 * - **LocalMachinePool** (infrastructure): once Cluster API has made a MachinePool its owner, keeps one Node per
 *   replica of the MachinePool's `spec.replicas` (Nodes `<pool>-<n>`, lowest free `n` first; scaling down removes
 *   the highest), registered like a LocalMachine's Node with the pool's `spec.template.spec.startupTaints` of the
 *   moment it joins; `spec.providerIDList` = those Nodes' providerIDs, then `status.replicas`, `ready` and
 *   `initialization.provisioned`. Cluster API's MachinePool controller turns the list into `status.nodeRefs`. The
 *   provider watches the owning MachinePools (in their owner reference's version) to follow scaling. A finalizer
 *   deletes the pool's Nodes with it.
 * - **LocalControlPlane** (controlplane): a machine-less control plane (the API server itself): reports itself
 *   initialized, at `spec.version`, with `spec.replicas` replicas ready and up to date.
 * - **LocalBootstrapConfig** (bootstrap): a bootstrap data Secret (nothing to run) and `status.dataSecretName`.
 *
 * Both provider contracts are served at once, so one provider works with every Cluster API release from v1.8 on: the
 * CRDs carry both contract labels (`cluster.x-k8s.io/v1beta1` and `…/v1beta2`), and each status carries the v1beta2
 * contract fields (`initialization.provisioned`, `initialization.controlPlaneInitialized`, `initialization.dataSecretCreated`)
 * and the v1beta1 ones (`ready`, `initialized`). Machines are read in the version of their owner reference.
 *
 * Where a Cluster's Nodes live is one function, {@link NodeClusterResolver}: today every Cluster is self-hosted (its
 * Nodes are in the management API server); a resolver returning another API server per Cluster is all it takes to
 * give Clusters their own workload API servers.
 */
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  type Informer,
  type KubernetesListObject,
  type KubernetesObject,
  type ObjectCache,
  type V1Node,
  type V1OwnerReference,
  type V1Taint,
} from '@kubernetes/client-node';
import {
  LOCAL_BOOTSTRAP_CONFIG,
  LOCAL_CLUSTER,
  LOCAL_CONTROL_PLANE,
  LOCAL_MACHINE,
  LOCAL_MACHINE_POOL,
  type KindApi,
} from './crds.ts';

/** Label Cluster API puts on objects of a Cluster (and requires on the kubeconfig Secret). */
export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
/** Label on the Secrets this provider creates. */
export const MANAGED_BY_LABEL = 'infrastructure.cluster.x-k8s.io/managed-by';
const MANAGED_BY = 'local-provider';
/** Finalizer on LocalMachines: their Node goes first. */
export const MACHINE_FINALIZER = 'localmachine.infrastructure.cluster.x-k8s.io';
/** Finalizer on LocalMachinePools: their Nodes go first. */
export const MACHINE_POOL_FINALIZER = 'localmachinepool.infrastructure.cluster.x-k8s.io';
/** Annotation on the Nodes of a LocalMachinePool: `<namespace>/<pool>` (which Nodes the pool may scale down or delete). */
export const MACHINE_POOL_ANNOTATION = 'infrastructure.cluster.x-k8s.io/local-machine-pool';
const CAPI_GROUP = 'cluster.x-k8s.io';

/** The API server where one Cluster's Nodes live. */
export interface NodeCluster {
  /** Client of that API server (the provider creates and deletes Nodes there). */
  readonly kubeConfig: KubeConfig;
  /** Admin kubeconfig (YAML) of that API server, stored in the Cluster's `<name>-kubeconfig` Secret. */
  readonly kubeconfigYaml: string;
  /** Its URL, `https://<host>:<port>`: the Cluster's `controlPlaneEndpoint`. */
  readonly server: string;
}

/** Which API server holds the Nodes of a Cluster. */
export type NodeClusterResolver = (cluster: { readonly namespace: string; readonly name: string }) => NodeCluster;

/** Options of {@link LocalProvider}. */
export interface LocalProviderOptions {
  /** The management cluster (where the Cluster API objects are). */
  readonly kubeConfig: KubeConfig;
  /** Self-hosted Clusters: Nodes in the management API server, whose admin kubeconfig is this. */
  readonly selfHosted?: { readonly kubeconfigYaml: string; readonly server: string };
  /** Overrides `selfHosted`: where each Cluster's Nodes live. */
  readonly nodeClusterFor?: NodeClusterResolver;
  /** Only objects of this namespace (default all). */
  readonly namespace?: string;
  /** Receives one line per notable action and per error (default: none). */
  readonly log?: (line: string) => void;
}

interface Obj extends KubernetesObject {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

type Handler = (obj: Obj) => Promise<void>;
/** Queues a reconcile of one object of a watched kind (by namespace and name). */
type Enqueue = (namespace: string, name: string) => void;

const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The provider; `start()` resolves once every informer has listed its objects. */
export class LocalProvider {
  readonly #kc: KubeConfig;
  readonly #custom: CustomObjectsApi;
  readonly #core: CoreV1Api;
  readonly #namespace: string | undefined;
  readonly #log: (line: string) => void;
  readonly #nodeClusterFor: NodeClusterResolver;
  readonly #informers: { api: KindApi; informer: Informer<Obj> & ObjectCache<Obj> }[] = [];
  readonly #queue = new KeyedQueue();
  /** Informers on Cluster API MachinePools, one per group version seen in a LocalMachinePool's owner reference. */
  readonly #machinePoolWatches = new Map<string, Promise<void>>();
  #enqueuePool: Enqueue = () => undefined;
  #enqueueMachine: Enqueue = () => undefined;
  /** LocalMachines provisioned by this process whose Node is still booting: its timer, and whether it has fired. */
  readonly #booting = new Map<string, { due: boolean; timer: NodeJS.Timeout }>();
  /** LocalMachines whose booted Node this process has registered (or found registered). */
  readonly #booted = new Set<string>();
  #stopped = false;

  constructor(o: LocalProviderOptions) {
    this.#kc = o.kubeConfig;
    this.#custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#core = o.kubeConfig.makeApiClient(CoreV1Api);
    this.#namespace = o.namespace;
    this.#log = o.log ?? (() => undefined);
    if (o.nodeClusterFor) this.#nodeClusterFor = o.nodeClusterFor;
    else if (o.selfHosted) {
      const self: NodeCluster = { kubeConfig: o.kubeConfig, ...o.selfHosted };
      this.#nodeClusterFor = () => self;
    } else throw new Error('LocalProvider needs selfHosted or nodeClusterFor');
  }

  /** Starts the informers and waits for their first lists. */
  async start(): Promise<void> {
    const handlers: [KindApi, Handler, Handler | undefined][] = [
      [LOCAL_CLUSTER, (o) => this.#reconcileCluster(o), (o) => this.#clusterDeleted(o)],
      [LOCAL_MACHINE, (o) => this.#reconcileMachine(o), undefined],
      [LOCAL_MACHINE_POOL, (o) => this.#reconcileMachinePool(o), undefined],
      [LOCAL_CONTROL_PLANE, (o) => this.#reconcileControlPlane(o), undefined],
      [LOCAL_BOOTSTRAP_CONFIG, (o) => this.#reconcileBootstrap(o), (o) => this.#bootstrapDeleted(o)],
    ];
    const enqueues = await Promise.all(handlers.map(([api, onChange, onDelete]) => this.#watch(api, onChange, onDelete)));
    this.#enqueuePool = enqueues[handlers.findIndex(([api]) => api === LOCAL_MACHINE_POOL)] ?? this.#enqueuePool;
    this.#enqueueMachine = enqueues[handlers.findIndex(([api]) => api === LOCAL_MACHINE)] ?? this.#enqueueMachine;
  }

  /** Stops the informers and waits for running reconciles. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const b of this.#booting.values()) clearTimeout(b.timer);
    this.#booting.clear();
    await Promise.all(this.#informers.map(({ informer }) => informer.stop()));
    await this.#queue.drain();
  }

  /** Starts an informer on a kind; returns how to queue a reconcile of one of its objects. */
  async #watch(api: KindApi, onChange: Handler, onDelete: Handler | undefined): Promise<Enqueue> {
    const ns = this.#namespace;
    const path = ns ? `/apis/${api.group}/${api.version}/namespaces/${ns}/${api.plural}` : `/apis/${api.group}/${api.version}/${api.plural}`;
    const list = async (): Promise<KubernetesListObject<Obj>> =>
      (ns
        ? await this.#custom.listNamespacedCustomObject({ group: api.group, version: api.version, plural: api.plural, namespace: ns })
        : await this.#custom.listClusterCustomObject({ group: api.group, version: api.version, plural: api.plural })) as KubernetesListObject<Obj>;
    // A CRD created a moment ago may answer 429 ("storage is (re)initializing") until its storage is up: wait for
    // one successful list before the informer starts (at most 30 s).
    for (let attempt = 0; ; attempt++) {
      try {
        await list();
        break;
      } catch (e) {
        if (attempt >= 300 || this.#stopped) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const informer = makeInformer<Obj>(this.#kc, path, list);
    this.#informers.push({ api, informer });
    const keyOf = (o: Obj): string => `${api.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
    const enqueueByName: Enqueue = (namespace, name) => {
      if (this.#stopped) return;
      this.#queue.add(`${api.kind}/${namespace}/${name}`, async () => {
        // Always the newest state the watch delivered; gone means a delete event handles it.
        const current = informer.get(name, namespace);
        if (current && !this.#stopped) await onChange(current);
      }, (e) => this.#log(`[local-provider] ${api.kind} ${namespace}/${name}: ${describe(e)} (retrying)`));
    };
    const enqueue = (o: Obj): void => {
      enqueueByName(o.metadata?.namespace ?? '', o.metadata?.name ?? '');
    };
    informer.on('add', enqueue);
    informer.on('update', enqueue);
    if (onDelete) {
      informer.on('delete', (o) => {
        if (this.#stopped) return;
        this.#queue.add(`${keyOf(o)}#deleted`, () => onDelete(o), (e) => this.#log(`[local-provider] ${api.kind} ${o.metadata?.namespace}/${o.metadata?.name} deleted: ${describe(e)} (retrying)`));
      });
    }
    informer.on('error', (e) => {
      if (this.#stopped) return;
      this.#log(`[local-provider] ${api.kind} watch failed: ${describe(e)}; restarting it`);
      setTimeout(() => {
        if (!this.#stopped) informer.start().catch(() => undefined); // a failed restart reports through 'error' again
      }, 1000);
    });
    await informer.start();
    if (this.#stopped) await informer.stop(); // started lazily (MachinePools) while the provider stopped
    return enqueueByName;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // LocalCluster

  async #reconcileCluster(o: Obj): Promise<void> {
    if (o.metadata?.deletionTimestamp) return;
    const ns = o.metadata?.namespace ?? '';
    const owner = ownerOf(o, 'Cluster');
    if (!owner) return; // Cluster API sets the owner reference; that update brings us back
    const target = this.#nodeClusterFor({ namespace: ns, name: owner.name });
    const url = new URL(target.server);
    const endpoint = { host: url.hostname, port: Number(url.port || 443) };
    await this.#ensureKubeconfigSecret(ns, owner, target);
    if (!(o.spec?.['controlPlaneEndpoint'] as { host?: string } | undefined)?.host) {
      await this.#custom.patchNamespacedCustomObject({ ...gvp(LOCAL_CLUSTER), namespace: ns, name: o.metadata?.name ?? '', body: { spec: { controlPlaneEndpoint: endpoint } } }, MERGE);
    }
    if ((o.status?.['initialization'] as { provisioned?: boolean } | undefined)?.provisioned !== true || o.status?.['ready'] !== true) {
      await this.#custom.patchNamespacedCustomObjectStatus({ ...gvp(LOCAL_CLUSTER), namespace: ns, name: o.metadata?.name ?? '', body: { status: { initialization: { provisioned: true }, ready: true } } }, MERGE);
      this.#log(`[local-provider] LocalCluster ${ns}/${o.metadata?.name} provisioned for Cluster ${owner.name} (Nodes at ${target.server})`);
    }
  }

  async #ensureKubeconfigSecret(namespace: string, cluster: V1OwnerReference, target: NodeCluster): Promise<void> {
    const name = `${cluster.name}-kubeconfig`;
    try {
      await this.#core.createNamespacedSecret({
        namespace,
        body: {
          metadata: {
            name,
            namespace,
            labels: { [CLUSTER_NAME_LABEL]: cluster.name, [MANAGED_BY_LABEL]: MANAGED_BY },
            ownerReferences: [{ apiVersion: cluster.apiVersion, kind: 'Cluster', name: cluster.name, uid: cluster.uid }],
          },
          type: 'cluster.x-k8s.io/secret',
          data: { value: Buffer.from(target.kubeconfigYaml).toString('base64') },
        },
      });
      this.#log(`[local-provider] Secret ${namespace}/${name} created`);
    } catch (e) {
      if (!(e instanceof ApiException) || e.code !== 409) throw e; // exists: never overwrite someone's kubeconfig
    }
  }

  async #clusterDeleted(o: Obj): Promise<void> {
    const owner = ownerOf(o, 'Cluster');
    if (!owner) return;
    await this.#deleteManagedSecret(o.metadata?.namespace ?? '', `${owner.name}-kubeconfig`);
  }

  async #deleteManagedSecret(namespace: string, name: string): Promise<void> {
    try {
      const secret = await this.#core.readNamespacedSecret({ namespace, name });
      if (secret.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) return;
      await this.#core.deleteNamespacedSecret({ namespace, name, body: { preconditions: { uid: secret.metadata?.uid ?? '' } } });
    } catch (e) {
      if (!(e instanceof ApiException) || (e.code !== 404 && e.code !== 409)) throw e;
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // LocalMachine

  async #reconcileMachine(o: Obj): Promise<void> {
    const ns = o.metadata?.namespace ?? '';
    const name = o.metadata?.name ?? '';
    const finalizers = o.metadata?.finalizers ?? [];
    const owner = ownerOf(o, 'Machine');
    if (o.metadata?.deletionTimestamp) {
      if (!finalizers.includes(MACHINE_FINALIZER)) return;
      const nodeName = (o.status?.['nodeName'] as string | undefined) ?? owner?.name;
      const clusterName = o.metadata?.labels?.[CLUSTER_NAME_LABEL] ?? '';
      if (nodeName) await this.#deleteNode(this.#nodeClusterFor({ namespace: ns, name: clusterName }), nodeName, providerIdOf(ns, nodeName));
      await this.#custom.patchNamespacedCustomObject(
        {
          ...gvp(LOCAL_MACHINE),
          namespace: ns,
          name,
          body: { metadata: { finalizers: finalizers.filter((f) => f !== MACHINE_FINALIZER), resourceVersion: o.metadata?.resourceVersion } },
        },
        MERGE,
      );
      return;
    }
    if (!owner) return; // Cluster API sets the owning Machine; that update brings us back
    if (!finalizers.includes(MACHINE_FINALIZER)) {
      await this.#custom.patchNamespacedCustomObject(
        { ...gvp(LOCAL_MACHINE), namespace: ns, name, body: { metadata: { finalizers: [...finalizers, MACHINE_FINALIZER], resourceVersion: o.metadata?.resourceVersion } } },
        MERGE,
      );
      return; // the update event continues
    }
    const bootSeconds = Number(o.spec?.['bootSeconds'] ?? 0);
    if ((o.status?.['initialization'] as { provisioned?: boolean } | undefined)?.provisioned === true) {
      if (bootSeconds > 0) await this.#bootedNode(o, owner, bootSeconds);
      return;
    }
    // The watch may not have delivered our own last status write yet: check the stored object before registering.
    const fresh = (await this.#custom.getNamespacedCustomObject({ ...gvp(LOCAL_MACHINE), namespace: ns, name })) as Obj;
    if ((fresh.status?.['initialization'] as { provisioned?: boolean } | undefined)?.provisioned === true) return;
    if (bootSeconds > 0) {
      await this.#provision(o, owner.name);
      const key = `${ns}/${name}`;
      // The timer itself marks the boot done: it can fire a few milliseconds before `Date.now()` reaches creation +
      // bootSeconds (libuv counts from the loop's cached time), and a reconcile that then found the boot unfinished
      // would wait for a timer that has already fired: the Node would never register.
      const entry = { due: false, timer: setTimeout(() => {
        entry.due = true;
        this.#enqueueMachine(ns, name);
      }, bootSeconds * 1000) };
      this.#booting.set(key, entry);
      this.#log(`[local-provider] LocalMachine ${ns}/${name} provisioned (${providerIdOf(ns, owner.name)}); its Node registers in ${bootSeconds} s`);
      return;
    }
    // In the version Cluster API wrote the owner reference with (v1beta1 up to CAPI v1.10, v1beta2 from v1.11).
    const machineVersion = owner.apiVersion.split('/')[1] ?? 'v1beta2';
    const machine = (await this.#custom.getNamespacedCustomObject({ group: CAPI_GROUP, version: machineVersion, plural: 'machines', namespace: ns, name: owner.name })) as Obj;
    const clusterName = (machine.spec?.['clusterName'] as string | undefined) ?? o.metadata?.labels?.[CLUSTER_NAME_LABEL] ?? '';
    const target = this.#nodeClusterFor({ namespace: ns, name: clusterName });
    const providerID = providerIdOf(ns, owner.name);
    await this.#registerNode(target, {
      name: owner.name,
      providerID,
      taints: (o.spec?.['startupTaints'] as V1Taint[] | undefined) ?? [],
      kubeletVersion: (machine.spec?.['version'] as string | undefined) ?? 'v0.0.0',
      clusterName,
    });
    await this.#provision(o, owner.name);
    this.#log(`[local-provider] LocalMachine ${ns}/${name} provisioned: Node ${owner.name} (${providerID})`);
  }

  /** `spec.providerID`, then the provisioned status (addresses, the Node's name). */
  async #provision(o: Obj, nodeName: string): Promise<void> {
    const ns = o.metadata?.namespace ?? '';
    const name = o.metadata?.name ?? '';
    const providerID = providerIdOf(ns, nodeName);
    const addresses = [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: nodeName }];
    if (o.spec?.['providerID'] !== providerID) {
      await this.#custom.patchNamespacedCustomObject({ ...gvp(LOCAL_MACHINE), namespace: ns, name, body: { spec: { providerID } } }, MERGE);
    }
    await this.#custom.patchNamespacedCustomObjectStatus(
      { ...gvp(LOCAL_MACHINE), namespace: ns, name, body: { status: { initialization: { provisioned: true }, ready: true, addresses, nodeName } } },
      MERGE,
    );
  }

  /**
   * A provisioned LocalMachine with `spec.bootSeconds`: its Node registers once the boot time this process started
   * has passed (at once after a restart of the provider, which forgot it), unless it is there already.
   */
  async #bootedNode(o: Obj, owner: { apiVersion: string; name: string }, bootSeconds: number): Promise<void> {
    const ns = o.metadata?.namespace ?? '';
    const key = `${ns}/${o.metadata?.name ?? ''}`;
    if (this.#booted.has(key)) return;
    const booting = this.#booting.get(key);
    if (booting && !booting.due) return; // its timer queues the reconcile that registers it
    const machine = (await this.#custom.getNamespacedCustomObject({ group: CAPI_GROUP, version: owner.apiVersion.split('/')[1] ?? 'v1beta2', plural: 'machines', namespace: ns, name: owner.name })) as Obj;
    const clusterName = (machine.spec?.['clusterName'] as string | undefined) ?? o.metadata?.labels?.[CLUSTER_NAME_LABEL] ?? '';
    await this.#registerNode(this.#nodeClusterFor({ namespace: ns, name: clusterName }), {
      name: owner.name,
      providerID: providerIdOf(ns, owner.name),
      taints: (o.spec?.['startupTaints'] as V1Taint[] | undefined) ?? [],
      kubeletVersion: (machine.spec?.['version'] as string | undefined) ?? 'v0.0.0',
      clusterName,
    });
    this.#booted.add(key);
    if (booting) {
      this.#booting.delete(key);
      this.#log(`[local-provider] LocalMachine ${key}: Node ${owner.name} registered after booting ${bootSeconds} s`);
    }
  }

  /** Creates the Node with its startup taints, then reports it Ready, as a kubelet registering itself would. */
  async #registerNode(target: NodeCluster, n: { name: string; providerID: string; taints: V1Taint[]; kubeletVersion: string; clusterName: string; annotations?: Record<string, string> }): Promise<void> {
    const core = target.kubeConfig.makeApiClient(CoreV1Api);
    let node: V1Node;
    try {
      node = await core.createNode({
        body: {
          metadata: {
            name: n.name,
            ...(n.annotations ? { annotations: n.annotations } : {}),
            labels: {
              'kubernetes.io/hostname': n.name,
              'kubernetes.io/os': 'linux',
              'kubernetes.io/arch': 'amd64',
              'node.kubernetes.io/instance-type': 'local',
            },
          },
          spec: { providerID: n.providerID, ...(n.taints.length > 0 ? { taints: n.taints.map((t) => ({ key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect })) } : {}) },
        },
      });
    } catch (e) {
      if (!(e instanceof ApiException) || e.code !== 409) throw e;
      node = await core.readNode({ name: n.name });
      if (node.spec?.providerID !== n.providerID) {
        throw new Error(`Node ${n.name} exists with providerID ${JSON.stringify(node.spec?.providerID ?? '')}, not ${n.providerID}: not taking it over`);
      }
      for (const [key, value] of Object.entries(n.annotations ?? {})) {
        if (node.metadata?.annotations?.[key] !== value) {
          throw new Error(`Node ${n.name} exists without annotation ${key}=${value} (has ${JSON.stringify(node.metadata?.annotations?.[key] ?? '')}): not taking it over`);
        }
      }
    }
    if (node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return;
    const now = new Date();
    const condition = (type: string, status: string, reason: string, message: string) => ({ type, status, reason, message, lastHeartbeatTime: now, lastTransitionTime: now });
    await core.patchNodeStatus(
      {
        name: n.name,
        body: {
          status: {
            conditions: [
              condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
              condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
              condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
              condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status (local provider)'),
            ],
            addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: n.name }],
            capacity: { cpu: '4', memory: '8Gi', pods: '110' },
            allocatable: { cpu: '4', memory: '8Gi', pods: '110' },
            nodeInfo: {
              kubeletVersion: n.kubeletVersion,
              kubeProxyVersion: n.kubeletVersion,
              architecture: 'amd64',
              operatingSystem: 'linux',
              osImage: 'capi-taint-propagator local provider',
              containerRuntimeVersion: 'local://0',
              kernelVersion: '',
              machineID: '',
              systemUUID: '',
              bootID: '',
            },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
  }

  async #deleteNode(target: NodeCluster, name: string, providerID: string): Promise<void> {
    const core = target.kubeConfig.makeApiClient(CoreV1Api);
    try {
      const node = await core.readNode({ name });
      if (node.spec?.providerID !== providerID) return; // not ours
      await core.deleteNode({ name, body: { preconditions: { uid: node.metadata?.uid ?? '' } } });
      this.#log(`[local-provider] Node ${name} deleted`);
    } catch (e) {
      if (!(e instanceof ApiException) || (e.code !== 404 && e.code !== 409)) throw e;
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // LocalMachinePool

  async #reconcileMachinePool(o: Obj): Promise<void> {
    const ns = o.metadata?.namespace ?? '';
    const name = o.metadata?.name ?? '';
    const finalizers = o.metadata?.finalizers ?? [];
    const owner = ownerOf(o, 'MachinePool');
    const clusterName = o.metadata?.labels?.[CLUSTER_NAME_LABEL] ?? '';
    if (o.metadata?.deletionTimestamp) {
      if (!finalizers.includes(MACHINE_POOL_FINALIZER)) return;
      const target = this.#nodeClusterFor({ namespace: ns, name: clusterName });
      for (const member of await this.#poolMembers(target, ns, name)) await this.#deleteNode(target, member.name, member.providerID);
      await this.#custom.patchNamespacedCustomObject(
        {
          ...gvp(LOCAL_MACHINE_POOL),
          namespace: ns,
          name,
          body: { metadata: { finalizers: finalizers.filter((f) => f !== MACHINE_POOL_FINALIZER), resourceVersion: o.metadata?.resourceVersion } },
        },
        MERGE,
      );
      this.#log(`[local-provider] LocalMachinePool ${ns}/${name} deleted with its Nodes`);
      return;
    }
    if (!owner) return; // Cluster API sets the owning MachinePool; that update brings us back
    if (!finalizers.includes(MACHINE_POOL_FINALIZER)) {
      await this.#custom.patchNamespacedCustomObject(
        { ...gvp(LOCAL_MACHINE_POOL), namespace: ns, name, body: { metadata: { finalizers: [...finalizers, MACHINE_POOL_FINALIZER], resourceVersion: o.metadata?.resourceVersion } } },
        MERGE,
      );
      return; // the update event continues
    }
    // Scaling changes the MachinePool, not this object: follow MachinePools in the version Cluster API owns us with.
    const machinePoolApi: KindApi = { group: CAPI_GROUP, version: owner.apiVersion.split('/')[1] ?? 'v1beta2', plural: 'machinepools', kind: 'MachinePool' };
    await this.#watchMachinePools(machinePoolApi);
    const pool = (await this.#custom.getNamespacedCustomObject({ ...gvp(machinePoolApi), namespace: ns, name: owner.name })) as Obj;
    const replicas = (pool.spec?.['replicas'] as number | undefined) ?? 1;
    const poolClusterName = (pool.spec?.['clusterName'] as string | undefined) ?? clusterName;
    const target = this.#nodeClusterFor({ namespace: ns, name: poolClusterName });
    const members = await this.#poolMembers(target, ns, name);
    // Scale down: the highest indices leave (their Nodes deleted, as when a cloud terminates instances).
    for (const leaving of members.splice(replicas)) await this.#deleteNode(target, leaving.name, leaving.providerID);
    // Scale up: the lowest free indices join, with the template's startup taints of this moment.
    const template = (o.spec?.['template'] as { spec?: { startupTaints?: V1Taint[] } } | undefined)?.spec;
    const kubeletVersion = ((pool.spec?.['template'] as { spec?: { version?: string } } | undefined)?.spec?.version) ?? 'v0.0.0';
    const used = new Set(members.map((m) => m.index));
    for (let index = 0; members.length < replicas; index++) {
      if (used.has(index)) continue;
      const nodeName = `${name}-${index}`;
      const providerID = providerIdOf(ns, nodeName);
      await this.#registerNode(target, { name: nodeName, providerID, taints: template?.startupTaints ?? [], kubeletVersion, clusterName: poolClusterName, annotations: { [MACHINE_POOL_ANNOTATION]: `${ns}/${name}` } });
      members.push({ name: nodeName, providerID, index });
      this.#log(`[local-provider] LocalMachinePool ${ns}/${name}: Node ${nodeName} (${providerID}) joined`);
    }
    members.sort((a, b) => a.index - b.index);
    const providerIDList = members.map((m) => m.providerID);
    // The list first: Cluster API waits for it while status.replicas is not 0.
    if (JSON.stringify(o.spec?.['providerIDList'] ?? []) !== JSON.stringify(providerIDList)) {
      await this.#custom.patchNamespacedCustomObject({ ...gvp(LOCAL_MACHINE_POOL), namespace: ns, name, body: { spec: { providerIDList } } }, MERGE);
    }
    const desired = { initialization: { provisioned: true }, ready: true, replicas: members.length };
    const status = o.status ?? {};
    if (Object.entries(desired).every(([k, v]) => JSON.stringify(status[k]) === JSON.stringify(v))) return;
    await this.#custom.patchNamespacedCustomObjectStatus({ ...gvp(LOCAL_MACHINE_POOL), namespace: ns, name, body: { status: desired } }, MERGE);
  }

  /**
   * The Nodes of a pool, by index: annotated with the pool, providerID `local:///<ns>/<pool>-<n>`, named `<pool>-<n>`.
   * Listed from the API server (not from the pool's providerIDList), so a Node registered just before a failure is
   * still found.
   */
  async #poolMembers(target: NodeCluster, namespace: string, pool: string): Promise<{ name: string; providerID: string; index: number }[]> {
    const nodes = await target.kubeConfig.makeApiClient(CoreV1Api).listNode();
    const prefix = `${pool}-`;
    return nodes.items
      .flatMap((n) => {
        const name = n.metadata?.name ?? '';
        const index = name.startsWith(prefix) && /^(0|[1-9]\d{0,5})$/.test(name.slice(prefix.length)) ? Number(name.slice(prefix.length)) : -1;
        const ours = index >= 0 && n.metadata?.annotations?.[MACHINE_POOL_ANNOTATION] === `${namespace}/${pool}` && n.spec?.providerID === providerIdOf(namespace, name);
        return ours ? [{ name, providerID: providerIdOf(namespace, name), index }] : [];
      })
      .sort((a, b) => a.index - b.index);
  }

  /** Starts (once per version) the informer on MachinePools that queues their LocalMachinePool's reconcile. */
  async #watchMachinePools(api: KindApi): Promise<void> {
    let started = this.#machinePoolWatches.get(api.version);
    if (!started) {
      started = this.#watch(api, async (mp) => {
        const ref = (mp.spec?.['template'] as { spec?: { infrastructureRef?: { kind?: string; name?: string; apiGroup?: string; apiVersion?: string } } } | undefined)?.spec?.infrastructureRef;
        const group = ref?.apiGroup ?? ref?.apiVersion?.split('/')[0];
        if (ref?.kind === LOCAL_MACHINE_POOL.kind && group === LOCAL_MACHINE_POOL.group && ref.name) this.#enqueuePool(mp.metadata?.namespace ?? '', ref.name);
      }, undefined).then(() => undefined);
      this.#machinePoolWatches.set(api.version, started);
      started.catch(() => this.#machinePoolWatches.delete(api.version)); // the failed reconcile retries, and so does this
    }
    await started;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // LocalControlPlane

  async #reconcileControlPlane(o: Obj): Promise<void> {
    if (o.metadata?.deletionTimestamp) return;
    const ns = o.metadata?.namespace ?? '';
    const name = o.metadata?.name ?? '';
    const owner = ownerOf(o, 'Cluster');
    if (!owner) return;
    const target = this.#nodeClusterFor({ namespace: ns, name: owner.name });
    if (!(o.spec?.['controlPlaneEndpoint'] as { host?: string } | undefined)?.host) {
      const url = new URL(target.server);
      await this.#custom.patchNamespacedCustomObject(
        { ...gvp(LOCAL_CONTROL_PLANE), namespace: ns, name, body: { spec: { controlPlaneEndpoint: { host: url.hostname, port: Number(url.port || 443) } } } },
        MERGE,
      );
      return; // the update event continues
    }
    await this.#ensureKubeconfigSecret(ns, owner, target);
    const version = (o.spec?.['version'] as string | undefined) ?? '';
    const replicas = (o.spec?.['replicas'] as number | undefined) ?? 0;
    const desired = {
      initialization: { controlPlaneInitialized: true },
      ready: true, // v1beta1 contract
      initialized: true, // v1beta1 contract
      updatedReplicas: replicas, // v1beta1 contract
      unavailableReplicas: 0, // v1beta1 contract
      ...(version ? { version } : {}),
      replicas,
      readyReplicas: replicas,
      availableReplicas: replicas,
      upToDateReplicas: replicas,
      externalManagedControlPlane: true,
    };
    const status = o.status ?? {};
    if (Object.entries(desired).every(([k, v]) => JSON.stringify(status[k]) === JSON.stringify(v))) return;
    await this.#custom.patchNamespacedCustomObjectStatus({ ...gvp(LOCAL_CONTROL_PLANE), namespace: ns, name, body: { status: desired } }, MERGE);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // LocalBootstrapConfig

  async #reconcileBootstrap(o: Obj): Promise<void> {
    if (o.metadata?.deletionTimestamp) return;
    const ns = o.metadata?.namespace ?? '';
    const name = o.metadata?.name ?? '';
    if (o.status?.['dataSecretName'] === name && (o.status?.['initialization'] as { dataSecretCreated?: boolean } | undefined)?.dataSecretCreated === true && o.status?.['ready'] === true) return;
    const clusterName = o.metadata?.labels?.[CLUSTER_NAME_LABEL];
    try {
      await this.#core.createNamespacedSecret({
        namespace: ns,
        body: {
          metadata: {
            name,
            namespace: ns,
            labels: { ...(clusterName ? { [CLUSTER_NAME_LABEL]: clusterName } : {}), [MANAGED_BY_LABEL]: MANAGED_BY },
            ownerReferences: [{ apiVersion: `${LOCAL_BOOTSTRAP_CONFIG.group}/${LOCAL_BOOTSTRAP_CONFIG.version}`, kind: LOCAL_BOOTSTRAP_CONFIG.kind, name, uid: o.metadata?.uid ?? '', controller: true }],
          },
          type: 'cluster.x-k8s.io/secret',
          data: { value: Buffer.from('# local provider: the Node registers itself, nothing to run\n').toString('base64'), format: Buffer.from('cloud-config').toString('base64') },
        },
      });
    } catch (e) {
      if (!(e instanceof ApiException) || e.code !== 409) throw e;
    }
    await this.#custom.patchNamespacedCustomObjectStatus(
      { ...gvp(LOCAL_BOOTSTRAP_CONFIG), namespace: ns, name, body: { status: { initialization: { dataSecretCreated: true }, ready: true, dataSecretName: name } } },
      MERGE,
    );
  }

  async #bootstrapDeleted(o: Obj): Promise<void> {
    await this.#deleteManagedSecret(o.metadata?.namespace ?? '', o.metadata?.name ?? '');
  }
}

/** `local:///<namespace>/<machine>`: unique per Machine, stable across provider restarts. */
export function providerIdOf(namespace: string, machineName: string): string {
  return `local:///${namespace}/${machineName}`;
}

function ownerOf(o: Obj, kind: string): V1OwnerReference | undefined {
  return o.metadata?.ownerReferences?.find((r) => r.kind === kind && r.apiVersion.startsWith(`${CAPI_GROUP}/`));
}

function gvp(api: KindApi): { group: string; version: string; plural: string } {
  return { group: api.group, version: api.version, plural: api.plural };
}

function describe(e: unknown): string {
  if (e instanceof ApiException) {
    const body = typeof e.body === 'string' ? e.body : JSON.stringify(e.body);
    const message = /"message":"((?:[^"\\]|\\.)*)"/.exec(body ?? '')?.[1];
    return `HTTP ${e.code}${message ? `: ${message}` : ''}`;
  }
  return e instanceof Error ? e.message : String(e);
}

/**
 * At most one running task per key; a key added while its task runs runs once more afterwards (the newest state is
 * read when it starts). A failed task is retried with backoff (0.25 s doubling to 8 s) unless a newer add came in.
 */
class KeyedQueue {
  readonly #running = new Map<string, Promise<void>>();
  readonly #again = new Map<string, { task: () => Promise<void>; onError: (e: unknown) => void }>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #closed = false;

  add(key: string, task: () => Promise<void>, onError: (e: unknown) => void): void {
    if (this.#closed) return;
    if (this.#running.has(key)) {
      this.#again.set(key, { task, onError });
      return;
    }
    const run = (async () => {
      try {
        await task();
        this.#failures.delete(key);
      } catch (e) {
        if (e instanceof ApiException && e.code === 409) {
          // Someone wrote the object since our read: the watch brings the newer state (and another add).
          this.#failures.delete(key);
        } else {
          const n = (this.#failures.get(key) ?? 0) + 1;
          this.#failures.set(key, n);
          onError(e);
          if (!this.#again.has(key)) {
            const timer = setTimeout(() => {
              this.#timers.delete(timer);
              this.add(key, task, onError);
            }, Math.min(8000, 250 * 2 ** (n - 1)));
            this.#timers.add(timer);
          }
        }
      } finally {
        this.#running.delete(key);
        const next = this.#again.get(key);
        if (next) {
          this.#again.delete(key);
          this.add(key, next.task, next.onError);
        }
      }
    })();
    this.#running.set(key, run);
  }

  /** No new tasks; waits for the running ones. */
  async drain(): Promise<void> {
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#again.clear();
    while (this.#running.size > 0) await Promise.allSettled([...this.#running.values()]);
  }
}
