/**
 * The kube-apiserver flags of the local control plane, for its own API server and for every workload API server
 * (`workload-servers.ts`): loopback only, client-certificate authentication, RBAC, service-account keys. Pure.
 */

export interface ApiserverArgs {
  readonly etcdEndpoint: string;
  /** `--etcd-prefix` (default the apiserver's own, `/registry`): workload API servers keep their data apart. */
  readonly etcdPrefix?: string;
  readonly port: number;
  readonly pkiDir: string;
  readonly serving: { readonly certPath: string; readonly keyPath: string };
  readonly caCertPath: string;
  readonly serviceAccountKey: { readonly publicKeyPath: string; readonly privateKeyPath: string };
}

/** The flags, in order; callers append their extras (a repeated flag wins). */
export function kubeApiserverArgs(o: ApiserverArgs): string[] {
  const server = `https://127.0.0.1:${o.port}`;
  return [
    `--etcd-servers=${o.etcdEndpoint}`,
    ...(o.etcdPrefix ? [`--etcd-prefix=${o.etcdPrefix}`] : []),
    '--bind-address=127.0.0.1', `--secure-port=${o.port}`, '--advertise-address=127.0.0.1',
    '--endpoint-reconciler-type=none',
    `--cert-dir=${o.pkiDir}`, `--tls-cert-file=${o.serving.certPath}`, `--tls-private-key-file=${o.serving.keyPath}`,
    `--client-ca-file=${o.caCertPath}`,
    '--authorization-mode=RBAC',
    `--service-account-issuer=${server}`,
    `--service-account-key-file=${o.serviceAccountKey.publicKeyPath}`, `--service-account-signing-key-file=${o.serviceAccountKey.privateKeyPath}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    // ServiceAccount: no controller creates the default ServiceAccounts. TaintNodesByCondition: it adds
    // node.kubernetes.io/not-ready:NoSchedule to every created Node and no node lifecycle controller ever removes
    // it; tests must see exactly the taints they write.
    '--disable-admission-plugins=ServiceAccount,TaintNodesByCondition', '--allow-privileged=true',
    '--profiling=false', '--v=1',
  ];
}
