/**
 * The Cluster API version matrix: every release the product is tested against, in one place (adding v1.15 is one
 * line). `npm run test:matrix` runs the version-matrix scenario for every row; `npm test` (and CI) for the oldest and
 * the newest. Each row says what that release serves, which the scenario asserts against what the product discovers.
 */
import type { CapiApiVersion } from '#shared/domain/capi-api.ts';

export interface CapiRelease {
  /** The release tag of `sigs.k8s.io/cluster-api` (manager built from it, CRDs read from it). */
  readonly release: string;
  /** The newest Cluster API group version it serves (what the product must choose). */
  readonly servedApi: CapiApiVersion;
  /** Whether `Machine.spec.taints` and the `MachineTaintPropagation` gate exist (v1.12 and later). */
  readonly machineTaints: boolean;
}

export const CAPI_VERSION_MATRIX: readonly CapiRelease[] = [
  { release: 'v1.8.12', servedApi: 'v1beta1', machineTaints: false },
  { release: 'v1.10.9', servedApi: 'v1beta1', machineTaints: false },
  { release: 'v1.12.5', servedApi: 'v1beta2', machineTaints: true },
  { release: 'v1.14.2', servedApi: 'v1beta2', machineTaints: true },
];

/**
 * The rows to run: `CAPI_MATRIX=all` every row, `CAPI_MATRIX=v1.10.9,v1.12.5` those, otherwise (npm test, CI) the
 * oldest and the newest. Throws on a release that is not in the matrix.
 */
export function selectedCapiReleases(env: NodeJS.ProcessEnv = process.env): CapiRelease[] {
  const wanted = env['CAPI_MATRIX']?.trim();
  if (wanted === 'all') return [...CAPI_VERSION_MATRIX];
  if (!wanted) return [CAPI_VERSION_MATRIX[0], CAPI_VERSION_MATRIX.at(-1)].filter((r): r is CapiRelease => r !== undefined);
  return wanted.split(',').map((tag) => {
    const row = CAPI_VERSION_MATRIX.find((r) => r.release === tag.trim());
    if (!row) throw new Error(`CAPI_MATRIX names ${JSON.stringify(tag.trim())}, which is not in the matrix (${CAPI_VERSION_MATRIX.map((r) => r.release).join(', ')})`);
    return row;
  });
}
