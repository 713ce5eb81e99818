/**
 * `npm run control-plane:prepare`: finds kube-apiserver, etcd and kubectl (TEST_ASSET_*, KUBEBUILDER_ASSETS, the
 * cache) or builds them from Go modules with progress, and fetches the Cluster API CRDs. Exits 1 with the reason
 * when they cannot be had. CI runs it before the tests so that a build shows as a build, not as a slow test.
 */
import { resolveBinaries, resolveCrdDir } from './assets.ts';

const started = Date.now();
const binaries = await resolveBinaries({ log: (line) => console.log(line) });
if (!binaries.available) {
  console.error(`control-plane: ${binaries.reason}`);
  process.exit(1);
}
const crds = resolveCrdDir();
if (!crds.available) {
  console.error(`control-plane: ${crds.reason}`);
  process.exit(1);
}
console.log(`control-plane: kube-apiserver ${binaries.value.kubeApiserver}`);
console.log(`control-plane: etcd ${binaries.value.etcd}`);
console.log(`control-plane: CRDs ${crds.value}`);
console.log(`control-plane: ready to start (prepared in ${((Date.now() - started) / 1000).toFixed(1)} s)`);
