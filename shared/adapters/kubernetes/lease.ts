/**
 * Leader election on a coordination.k8s.io/v1 Lease (client-go's rules: a holder that has not renewed
 * within leaseDurationSeconds, as observed on our own clock, can be replaced; every write carries the
 * Lease's resourceVersion), with the forwarder's checkpoint stored in an annotation of the same Lease
 * so that leadership and resume point change hands together.
 */
import { ApiException, CoordinationV1Api, V1MicroTime } from './client-node.ts';
import type { KubeConfig, V1Lease } from '@kubernetes/client-node';
import type { Checkpoint } from '#shared/domain/watch-event.ts';
import { AccessDeniedError, TransientError } from '#shared/errors.ts';
import type { LeaderLease, LeaseAttempt } from '#shared/ports/leader-lease.ts';
import { withCallDeadline } from './call-deadline.ts';

/** Annotation on the Lease that holds the checkpoint as JSON `{ "<stream>": "<resourceVersion>" }`. */
export const CHECKPOINT_ANNOTATION = 'capi-taint-propagator.dev/checkpoint';

export interface KubernetesLeaderLeaseOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationSeconds: number;
  readonly now?: () => Date;
}

function codeOf(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

function translate(err: unknown, operation: string): Error {
  const code = codeOf(err);
  if (code === 401 || code === 403) return new AccessDeniedError(operation, `HTTP ${code}`, err);
  return new TransientError(operation, code ? `HTTP ${code}` : String(err instanceof Error ? err.message : err), err);
}

/** Parses the checkpoint annotation; anything unreadable is an empty checkpoint (a fresh start). */
export function decodeCheckpoint(text: string | undefined): Checkpoint {
  if (!text) return {};
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return {};
    return Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== ''));
  } catch {
    return {};
  }
}

/** Serialises a checkpoint with sorted keys. */
export function encodeCheckpoint(checkpoint: Checkpoint): string {
  return JSON.stringify(Object.fromEntries(Object.entries(checkpoint).sort(([a], [b]) => a.localeCompare(b))));
}

/** A LeaderLease on a Kubernetes Lease object. */
export class KubernetesLeaderLease implements LeaderLease {
  private readonly api: CoordinationV1Api;
  private readonly o: KubernetesLeaderLeaseOptions;
  private readonly now: () => Date;
  /** The last record seen (holder + renewTime) and when we saw it change, on our clock. */
  private observed: { record: string; at: number } | undefined;
  private lastRenewedAt = 0;

  constructor(options: KubernetesLeaderLeaseOptions) {
    this.o = options;
    this.api = options.kubeConfig.makeApiClient(CoordinationV1Api);
    this.now = options.now ?? (() => new Date());
  }

  private async read(): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name: this.o.name, namespace: this.o.namespace });
    } catch (err) {
      if (codeOf(err) === 404) return undefined;
      throw translate(err, `reading Lease ${this.o.namespace}/${this.o.name}`);
    }
  }

  private isExpired(lease: V1Lease): boolean {
    const holder = lease.spec?.holderIdentity ?? '';
    if (holder === '') return true;
    const renew = lease.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : 0;
    const record = `${holder}@${renew}`;
    const nowMs = this.now().getTime();
    if (this.observed?.record !== record) this.observed = { record, at: nowMs };
    const durationMs = (lease.spec?.leaseDurationSeconds ?? this.o.leaseDurationSeconds) * 1000;
    return nowMs - this.observed.at > durationMs;
  }

  private body(base: V1Lease | undefined, checkpoint: Checkpoint | undefined, holder: string): V1Lease {
    // MicroTime serialises with the six fractional digits the API server requires.
    const now = new V1MicroTime(this.now().getTime());
    const previousHolder = base?.spec?.holderIdentity ?? '';
    const transitions = (base?.spec?.leaseTransitions ?? 0) + (previousHolder !== holder && holder !== '' ? 1 : 0);
    const annotations = { ...(base?.metadata?.annotations ?? {}) };
    if (checkpoint) annotations[CHECKPOINT_ANNOTATION] = encodeCheckpoint(checkpoint);
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { ...(base?.metadata ?? {}), name: this.o.name, namespace: this.o.namespace, annotations },
      spec: {
        ...(base?.spec ?? {}),
        holderIdentity: holder,
        leaseDurationSeconds: this.o.leaseDurationSeconds,
        acquireTime: previousHolder !== holder ? now : (base?.spec?.acquireTime ?? now),
        renewTime: now,
        leaseTransitions: transitions,
      },
    } as V1Lease;
  }

  /**
   * Bounds one Lease operation (read + write) so that it ends well within the lease duration: a hung
   * call fails like an unreachable API server instead of holding leadership decisions.
   */
  private bounded<T>(fn: () => Promise<T>): Promise<T> {
    const durationMs = this.o.leaseDurationSeconds * 1000;
    return withCallDeadline(Date.now() + durationMs * 0.6, fn, Math.max(1_000, durationMs / 3));
  }

  tryAcquire(): Promise<LeaseAttempt> {
    return this.bounded(() => this.acquireOnce());
  }

  renew(checkpoint: Checkpoint): Promise<boolean> {
    return this.bounded(() => this.renewOnce(checkpoint));
  }

  release(checkpoint: Checkpoint): Promise<void> {
    return this.bounded(() => this.releaseOnce(checkpoint));
  }

  private async acquireOnce(): Promise<LeaseAttempt> {
    const lease = await this.read();
    if (!lease) {
      try {
        await this.api.createNamespacedLease({ namespace: this.o.namespace, body: this.body(undefined, {}, this.o.identity) });
        this.lastRenewedAt = this.now().getTime();
        return { acquired: true, checkpoint: {} };
      } catch (err) {
        if (codeOf(err) === 409) return { acquired: false, holder: undefined };
        if (codeOf(err) === 404) {
          throw new TransientError(
            `creating Lease ${this.o.namespace}/${this.o.name}`,
            `namespace ${this.o.namespace} does not exist: apply infra/rbac/management-cluster.yaml or set STATE_NAMESPACE`,
            err,
          );
        }
        throw translate(err, `creating Lease ${this.o.namespace}/${this.o.name}`);
      }
    }
    const holder = lease.spec?.holderIdentity || undefined;
    if (holder !== this.o.identity && !this.isExpired(lease)) return { acquired: false, holder };
    const checkpoint = decodeCheckpoint(lease.metadata?.annotations?.[CHECKPOINT_ANNOTATION]);
    try {
      await this.api.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: this.body(lease, undefined, this.o.identity) });
      this.lastRenewedAt = this.now().getTime();
      return { acquired: true, checkpoint };
    } catch (err) {
      if (codeOf(err) === 409) return { acquired: false, holder };
      throw translate(err, `taking Lease ${this.o.namespace}/${this.o.name}`);
    }
  }

  private async renewOnce(checkpoint: Checkpoint): Promise<boolean> {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const lease = await this.read();
        if (!lease || (lease.spec?.holderIdentity ?? '') !== this.o.identity) return false;
        await this.api.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: this.body(lease, checkpoint, this.o.identity) });
        this.lastRenewedAt = this.now().getTime();
        return true;
      } catch (err) {
        if (codeOf(err) === 409) continue; // someone wrote in between; re-read and decide again
        // A failed renewal keeps leadership only while the last successful one is still valid.
        return this.now().getTime() - this.lastRenewedAt < this.o.leaseDurationSeconds * 1000 * 0.8;
      }
    }
    return false;
  }

  private async releaseOnce(checkpoint: Checkpoint): Promise<void> {
    const lease = await this.read();
    if (!lease || (lease.spec?.holderIdentity ?? '') !== this.o.identity) return;
    try {
      await this.api.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: this.body(lease, checkpoint, '') });
    } catch (err) {
      throw translate(err, `releasing Lease ${this.o.namespace}/${this.o.name}`);
    }
  }
}
