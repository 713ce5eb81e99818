/**
 * The parts of @kubernetes/client-node the adapters use, imported from their own modules instead of the package's
 * index: the index also loads exec, attach, cp and port-forward (ws, tar-fs, streamx, ...), which the product never
 * calls and which esbuild cannot drop (the package declares no `sideEffects`). -115 KiB per Lambda bundle
 * (BENCHMARKS.md, cold start). Types still come from the index (`import type` is erased).
 */
export { KubeConfig } from '@kubernetes/client-node/dist/config.js';
export { ApiException } from '@kubernetes/client-node/dist/gen/apis/exception.js';
export {
  ObjectApisApi as ApisApi,
  ObjectCoordinationV1Api as CoordinationV1Api,
  ObjectCoreV1Api as CoreV1Api,
  ObjectCustomObjectsApi as CustomObjectsApi,
} from '@kubernetes/client-node/dist/gen/types/ObjectParamAPI.js';
export { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
export { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
export { V1MicroTime } from '@kubernetes/client-node/dist/types.js';
