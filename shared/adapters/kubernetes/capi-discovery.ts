/**
 * Discovery of the Cluster API group version to read (the rule: `#shared/domain/capi-api.ts`): asks the management
 * cluster which of `cluster.x-k8s.io/v1beta2` and `v1beta1` it serves with Machines and Clusters, once, and keeps the
 * answer until a caller reports a 404 on it (Cluster API upgraded or removed). One discovery GET on a current Cluster
 * API, two on v1.10 and older, three when neither is served (`/apis`, only to say precisely what is served).
 */
import type { V1APIGroupList, V1APIResourceList } from '@kubernetes/client-node';
import { CAPI_GROUP, chooseCapiApiVersion, SUPPORTED_CAPI_API_VERSIONS, type CapiApiVersion, type ServedVersion } from '#shared/domain/capi-api.ts';
import { UnsupportedClusterApiError } from '#shared/errors.ts';
import { statusOf, toProductError } from './api-errors.ts';
import { kubeCall, type ClusterEndpoint } from './kube-http.ts';

/** The group version in use, resolved lazily. */
export interface CapiApi {
  /** The version to read; throws UnsupportedClusterApiError when none is served, a TransientError when discovery failed. */
  version(): Promise<CapiApiVersion>;
  /** A read in `version` answered 404 for the whole resource: ask the server again on the next call. */
  notServed(version: CapiApiVersion): void;
}

export interface CapiDiscoveryOptions {
  /** Called once per discovery that found no supported version (log + metric). */
  readonly onUnsupported?: (error: UnsupportedClusterApiError) => void;
  /** Called when discovery settled on a version (including a change after a re-check). */
  readonly onChosen?: (version: CapiApiVersion) => void;
}

/** A CapiApi that asks the management cluster's API server, once, and again after a reported 404. */
export class KubernetesCapiDiscovery implements CapiApi {
  readonly #endpoint: ClusterEndpoint;
  readonly #o: CapiDiscoveryOptions;
  #cached: Promise<CapiApiVersion> | undefined;
  #current: CapiApiVersion | undefined;

  constructor(endpoint: ClusterEndpoint, options: CapiDiscoveryOptions = {}) {
    this.#endpoint = endpoint;
    this.#o = options;
  }

  version(): Promise<CapiApiVersion> {
    this.#cached ??= this.#discover().catch((error: unknown) => {
      this.#cached = undefined; // ask again next time: a failed or unsupported discovery is not remembered
      throw error;
    });
    return this.#cached;
  }

  notServed(version: CapiApiVersion): void {
    if (this.#current === version) {
      this.#cached = undefined;
      this.#current = undefined;
    }
  }

  async #discover(): Promise<CapiApiVersion> {
    const found: Partial<Record<CapiApiVersion, ServedVersion>> = {};
    for (const version of SUPPORTED_CAPI_API_VERSIONS) {
      found[version] = await this.#served(version);
      const choice = chooseCapiApiVersion(found);
      if (choice.supported) return this.#chosen(choice.version);
    }
    const apis = { method: 'GET', path: '/apis' } as const;
    const groups = await kubeCall<V1APIGroupList>(this.#endpoint, apis).catch((error: unknown) => {
      throw toProductError('Listing API groups', error);
    });
    const groupVersions = (groups.groups ?? []).find((g) => g.name === CAPI_GROUP)?.versions.map((v) => v.version);
    const choice = chooseCapiApiVersion(found, groupVersions);
    if (choice.supported) return this.#chosen(choice.version); // served between the two calls
    const error = new UnsupportedClusterApiError(choice.problem);
    this.#o.onUnsupported?.(error);
    throw error;
  }

  #chosen(version: CapiApiVersion): CapiApiVersion {
    if (this.#current !== version) this.#o.onChosen?.(version);
    this.#current = version;
    return version;
  }

  async #served(version: CapiApiVersion): Promise<ServedVersion> {
    try {
      const list = await kubeCall<V1APIResourceList>(this.#endpoint, { method: 'GET', path: `/apis/${CAPI_GROUP}/${version}` });
      return { served: true, resources: (list.resources ?? []).map((r) => r.name).filter((n) => !n.includes('/')) };
    } catch (error) {
      if (statusOf(error) === 404) return { served: false };
      throw toProductError(`Discovering ${CAPI_GROUP}/${version}`, error);
    }
  }
}

/** True for a 404 saying the collection is not served (no Kubernetes Status naming an object), not an object gone. */
export function isCollectionNotServed(error: unknown): boolean {
  if (statusOf(error) !== 404) return false;
  try {
    const parsed = JSON.parse(String((error as { body?: unknown }).body)) as { kind?: unknown; details?: { name?: unknown } };
    return !(parsed.kind === 'Status' && typeof parsed.details?.name === 'string' && parsed.details.name !== '');
  } catch {
    return true;
  }
}
