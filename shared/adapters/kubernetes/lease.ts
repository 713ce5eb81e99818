/**
 * Leader election on a coordination.k8s.io/v1 Lease by client-go's rules (expiry as observed on our own clock; every
 * write carries the resourceVersion), with the forwarder's checkpoint in an annotation of the same Lease: leadership
 * and resume point change hands together.
 */
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { RotaMember } from '#shared/policy/forwarder-rota.ts';
import type { ForwarderRota, LeaderLease, LeaseAttempt, LeaseRecord } from '#shared/ports/leader-lease.ts';
import { createFailure, statusOf, toProductError } from './api-errors.ts';
import { withCallDeadline } from './call-deadline.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';

/** Annotation on the Lease that holds the checkpoint as JSON `{ "<stream>": "<resourceVersion>" }`. */
export const CHECKPOINT_ANNOTATION = 'capi-taint-propagator.dev/checkpoint';

/** Annotation on the Lease with the rota's members as JSON `{ "<id>": { "until": "<time>", "seen": "<time>" } }`. */
export const MEMBERS_ANNOTATION = 'capi-taint-propagator.dev/members';

/** Writes of the same Lease by several members collide now and then (HTTP 409): each is re-read and retried this often. */
const CONFLICT_ATTEMPTS = 5;

/** A Lease as the API server sends it: times are MicroTime strings; fields not named here go back untouched. */
interface LeaseObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string>; [field: string]: unknown };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
    [field: string]: unknown;
  };
}

/** A MicroTime as client-node's V1MicroTime writes it (`…00.123000Z`): the API server wants six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().slice(0, -1) + '000Z';
}

export interface KubernetesLeaderLeaseOptions {
  readonly kubeConfig: ClusterEndpoint;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationSeconds: number;
  readonly now?: () => Date;
}

/** The entries of an annotation that holds a JSON object; none when it is absent or holds anything else. */
function jsonEntries(text: string | undefined): Array<[string, unknown]> {
  try {
    const v: unknown = JSON.parse(text ?? '');
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? Object.entries(v) : [];
  } catch {
    return [];
  }
}

/** Parses the checkpoint annotation; anything unreadable is an empty checkpoint (a fresh start). */
function decodeCheckpoint(text: string | undefined): Checkpoint {
  const isVersion = (e: [string, unknown]): e is [string, string] => typeof e[1] === 'string' && e[1] !== '';
  return Object.fromEntries(jsonEntries(text).filter(isVersion));
}

/** Parses the members annotation; entries that cannot be read are left out (they are dropped at the next write). */
export function decodeMembers(text: string | undefined): RotaMember[] {
  return jsonEntries(text).flatMap(([id, entry]) => {
    const e = entry as { until?: unknown; seen?: unknown } | null;
    const until = typeof e?.until === 'string' ? Date.parse(e.until) : NaN;
    const seen = typeof e?.seen === 'string' ? Date.parse(e.seen) : NaN;
    if (!Number.isFinite(until) || !Number.isFinite(seen) || id === '') return [];
    return [{ id, until: new Date(until), seenAt: new Date(seen) }];
  });
}

/** Serialises the members with sorted ids. */
export function encodeMembers(members: readonly RotaMember[]): string {
  const sorted = [...members].sort((a, b) => a.id.localeCompare(b.id));
  return JSON.stringify(Object.fromEntries(sorted.map((m) => [m.id, { until: m.until.toISOString(), seen: m.seenAt.toISOString() }])));
}

function encodeCheckpoint(checkpoint: Checkpoint): string {
  return JSON.stringify(Object.fromEntries(Object.entries(checkpoint).sort(([a], [b]) => a.localeCompare(b))));
}

/** A LeaderLease on a Kubernetes Lease object; the same object keeps the rota's members (ForwarderRota). */
export class KubernetesLeaderLease implements LeaderLease, ForwarderRota {
  readonly identity: string;
  private readonly o: KubernetesLeaderLeaseOptions;
  private readonly now: () => Date;
  private readonly where: string;
  /** The last record seen (holder + renewTime) and when we saw it change, on our clock. */
  private observed: { record: string; at: number } | undefined;
  private lastRenewedAt = 0;

  constructor(options: KubernetesLeaderLeaseOptions) {
    this.identity = options.identity;
    this.o = options;
    this.now = options.now ?? (() => new Date());
    this.where = `Lease ${options.namespace}/${options.name}`;
  }

  private call(method: 'GET' | 'POST' | 'PUT', body?: LeaseObject): Promise<LeaseObject> {
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${seg(this.o.namespace)}/leases`;
    const path = method === 'POST' ? leases : `${leases}/${seg(this.o.name)}`;
    return kubeCall<LeaseObject>(this.o.kubeConfig, { method, path, body });
  }

  private async read(): Promise<LeaseObject | undefined> {
    try {
      return await this.call('GET');
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw toProductError(`reading ${this.where}`, err);
    }
  }

  private isExpired(lease: LeaseObject): boolean {
    const holder = lease.spec?.holderIdentity ?? '';
    if (holder === '') return true;
    const renew = lease.spec?.renewTime ? Date.parse(lease.spec.renewTime) : 0;
    const record = `${holder}@${renew}`;
    const nowMs = this.now().getTime();
    if (this.observed?.record !== record) this.observed = { record, at: nowMs };
    const durationMs = (lease.spec?.leaseDurationSeconds ?? this.o.leaseDurationSeconds) * 1000;
    return nowMs - this.observed.at > durationMs;
  }

  private body(base: LeaseObject | undefined, checkpoint: Checkpoint, holder: string): LeaseObject {
    // The six fractional digits the API server requires; a kept acquireTime goes back as the string it came as.
    const now = microTime(this.now().getTime());
    const previousHolder = base?.spec?.holderIdentity ?? '';
    const transitions = (base?.spec?.leaseTransitions ?? 0) + (previousHolder !== holder && holder !== '' ? 1 : 0);
    const annotations = { ...base?.metadata?.annotations, [CHECKPOINT_ANNOTATION]: encodeCheckpoint(checkpoint) };
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
    };
  }

  /** Bounds one operation (read + write) well within the lease duration: a hung call fails, holding no decision. */
  private bounded<T>(fn: () => Promise<T>): Promise<T> {
    const durationMs = this.o.leaseDurationSeconds * 1000;
    return withCallDeadline(Date.now() + durationMs * 0.6, fn, Math.max(1_000, durationMs / 3));
  }

  tryAcquire(): Promise<LeaseAttempt> {
    return this.bounded(async () => {
      const lease = await this.read();
      const holder = lease?.spec?.holderIdentity || undefined;
      if (lease && holder !== this.identity && !this.isExpired(lease)) return { acquired: false, holder };
      const checkpoint = decodeCheckpoint(lease?.metadata?.annotations?.[CHECKPOINT_ANNOTATION]);
      try {
        await this.call(lease ? 'PUT' : 'POST', this.body(lease, checkpoint, this.identity));
        this.lastRenewedAt = this.now().getTime();
        return { acquired: true, checkpoint };
      } catch (err) {
        if (statusOf(err) === 409) return { acquired: false, holder };
        if (lease) throw toProductError(`taking ${this.where}`, err);
        throw createFailure(`creating ${this.where}`, this.o.namespace, err);
      }
    });
  }

  renew(checkpoint: Checkpoint): Promise<boolean> {
    return this.bounded(async () => {
      try {
        const renewed = await this.putHeld(`renewing ${this.where}`, checkpoint, this.identity);
        if (renewed) this.lastRenewedAt = this.now().getTime();
        return renewed;
      } catch (err) {
        // Every attempt conflicted: other members keep writing the Lease, so leadership ends at once.
        if (err instanceof Error && statusOf(err.cause) === 409) return false;
        // A failed renewal keeps leadership only while the last successful one is still valid.
        return this.now().getTime() - this.lastRenewedAt < this.o.leaseDurationSeconds * 1000 * 0.8;
      }
    });
  }

  release(checkpoint: Checkpoint): Promise<void> {
    return this.bounded(async () => void (await this.putHeld(`releasing ${this.where}`, checkpoint, '')));
  }

  /**
   * Writes the Lease with `holder` (this member to renew, '' to release); false when this member does not hold it.
   * Throws `operation`'s error, whose cause is the last 409 when every attempt conflicted.
   */
  private async putHeld(operation: string, checkpoint: Checkpoint, holder: string): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const lease = await this.read();
      if (!lease || (lease.spec?.holderIdentity ?? '') !== this.identity) return false;
      try {
        await this.call('PUT', this.body(lease, checkpoint, holder));
        return true;
      } catch (err) {
        // 409: someone (a member's heartbeat) wrote in between; re-read and decide again.
        if (statusOf(err) !== 409 || attempt === CONFLICT_ATTEMPTS) throw toProductError(operation, err);
      }
    }
  }

  updateMembers(change: Parameters<ForwarderRota['updateMembers']>[0]): Promise<LeaseRecord> {
    const operation = `recording the forwarder members on ${this.where}`;
    return this.bounded(async () => {
      for (let attempt = 0; ; attempt++) {
        const lease = await this.read();
        const record: LeaseRecord = {
          holder: lease?.spec?.holderIdentity || undefined,
          checkpoint: decodeCheckpoint(lease?.metadata?.annotations?.[CHECKPOINT_ANNOTATION]),
          members: decodeMembers(lease?.metadata?.annotations?.[MEMBERS_ANNOTATION]),
        };
        const members = change(record, this.now());
        if (members === undefined) return record;
        const base = lease ?? this.body(undefined, {}, '');
        const annotations = { ...base.metadata?.annotations, [MEMBERS_ANNOTATION]: encodeMembers(members) };
        try {
          await this.call(lease ? 'PUT' : 'POST', { ...base, metadata: { ...base.metadata, annotations } });
          return { ...record, members };
        } catch (err) {
          if (statusOf(err) === 409 && attempt < CONFLICT_ATTEMPTS - 1) continue; // someone wrote in between
          throw lease ? toProductError(operation, err) : createFailure(operation, this.o.namespace, err);
        }
      }
    });
  }
}
