/**
 * `npm run control-plane:prepare`: finds kube-apiserver, etcd, kubectl and kube-controller-manager (TEST_ASSET_*,
 * KUBEBUILDER_ASSETS, the cache) or builds them from Go modules with progress (one `go build` for the Kubernetes
 * ones), fetches the Cluster API module (CRDs, webhook manifests) and builds its core manager into the cache
 * (`CAPI_VERSION` picks the release), then the same for each release of the version matrix that the tests will run
 * (`CAPI_MATRIX`; by default the oldest and the newest). Exits 1 with the reason when something cannot be had.
 * CI runs it before the tests so that a build shows as a build, not as a slow test.
 */
import { resolveBinaries, resolveClusterApiManager, resolveClusterApiManifests, resolveControllerManager } from './assets.ts';
import { selectedCapiReleases } from './capi-versions.ts';

const started = Date.now();
const log = (line: string): void => console.log(line);
const binaries = await resolveBinaries({ log });
if (!binaries.available) {
  console.error(`control-plane: ${binaries.reason}`);
  process.exit(1);
}
const controllerManager = await resolveControllerManager({ log });
if (!controllerManager.available) {
  console.error(`control-plane: ${controllerManager.reason}`);
  process.exit(1);
}
const manifests = resolveClusterApiManifests();
if (!manifests.available) {
  console.error(`control-plane: ${manifests.reason}`);
  process.exit(1);
}
const manager = await resolveClusterApiManager({ log });
if (!manager.available) {
  console.error(`control-plane: ${manager.reason}`);
  process.exit(1);
}
console.log(`control-plane: kube-apiserver ${binaries.value.kubeApiserver}`);
console.log(`control-plane: etcd ${binaries.value.etcd}`);
console.log(`control-plane: kube-controller-manager ${controllerManager.value}`);
console.log(`control-plane: Cluster API ${manifests.value.version}: ${manifests.value.crdFiles.length} CRDs in ${manifests.value.crdDir}`);
console.log(`control-plane: Cluster API manager ${manager.value}`);
for (const { release } of selectedCapiReleases()) {
  if (release === manifests.value.version) continue;
  const env = { ...process.env, CAPI_VERSION: release, TEST_ASSET_CLUSTER_API_MANAGER: '', CAPI_MODULE_DIR: '' };
  const m = resolveClusterApiManifests(env);
  const bin = m.available ? await resolveClusterApiManager({ log, env }) : m;
  if (!m.available || !bin.available) {
    console.error(`control-plane: version matrix, Cluster API ${release}: ${(!m.available ? m : bin.available ? undefined : bin)?.reason ?? ''}`);
    process.exit(1);
  }
  console.log(`control-plane: version matrix, Cluster API ${release}: ${m.value.crdFiles.length} CRDs, manager ${bin.value}`);
}
console.log(`control-plane: ready to start (prepared in ${((Date.now() - started) / 1000).toFixed(1)} s)`);
