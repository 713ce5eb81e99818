/**
 * Which Cluster API group version the product reads, from discovery, never guessed (docs/next-to-cluster-api.md,
 * "Cluster API versions"): `v1beta2` and `v1beta1` carry the fields the product reads in the same places.
 */

export const CAPI_GROUP = 'cluster.x-k8s.io';

/** Supported group versions, most preferred first. */
export const SUPPORTED_CAPI_API_VERSIONS = ['v1beta2', 'v1beta1'] as const;
export type CapiApiVersion = (typeof SUPPORTED_CAPI_API_VERSIONS)[number];

/** Resources the product reads in the chosen version: without them it cannot work. */
export const REQUIRED_CAPI_RESOURCES = ['machines', 'clusters'] as const;

/** What discovery found for one candidate version: not served, or served with these resource names. */
export type ServedVersion = { readonly served: false } | { readonly served: true; readonly resources: readonly string[] };

/** The decision: a version, or one sentence saying why the management cluster is not supported. */
export type CapiApiChoice = { readonly supported: true; readonly version: CapiApiVersion } | { readonly supported: false; readonly problem: string };

/**
 * Picks the first supported version served with every required resource; else says why. `groupVersions` (from
 * `/apis`; undefined: the group is not served) only makes that sentence precise.
 * @example chooseCapiApiVersion({ v1beta2: { served: false }, v1beta1: { served: true, resources: ['machines', 'clusters'] } }) // { supported: true, version: 'v1beta1' }
 */
export function chooseCapiApiVersion(found: Readonly<Partial<Record<CapiApiVersion, ServedVersion>>>, groupVersions?: readonly string[] | undefined): CapiApiChoice {
  const incomplete: string[] = [];
  for (const version of SUPPORTED_CAPI_API_VERSIONS) {
    const v = found[version];
    if (!v?.served) continue;
    const missing = REQUIRED_CAPI_RESOURCES.filter((r) => !v.resources.includes(r));
    if (missing.length === 0) return { supported: true, version };
    incomplete.push(`${CAPI_GROUP}/${version} is served without ${missing.join(', ')} (a Cluster API CRD is missing)`);
  }
  const wanted = SUPPORTED_CAPI_API_VERSIONS.map((v) => `${CAPI_GROUP}/${v}`).join(' or ');
  if (incomplete.length > 0) return { supported: false, problem: `${incomplete.join('; ')}; the product needs ${REQUIRED_CAPI_RESOURCES.join(' and ')} in ${wanted}` };
  if (groupVersions === undefined || groupVersions.length === 0) {
    return { supported: false, problem: `the management cluster serves no ${CAPI_GROUP} API (Cluster API is not installed); the product needs ${wanted}` };
  }
  return { supported: false, problem: `the management cluster serves ${CAPI_GROUP} only as ${groupVersions.join(', ')}; the product needs ${wanted} (Cluster API v1.0 or later)` };
}

/** `cluster.x-k8s.io/<version>`, the apiVersion of objects read in that version. */
export function capiApiVersionString(version: CapiApiVersion): string {
  return `${CAPI_GROUP}/${version}`;
}
