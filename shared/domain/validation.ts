/**
 * Validation of Machine taint declarations with both of upstream's layers in one place (Q13; the rules:
 * docs/declaring-taints.md): the CRD schema and the admission webhooks. What passes here passes both.
 */
import type { DeclarationIssue } from '#shared/errors.ts';
import { OUTDATED_REVISION_TAINT_KEY, Propagation, TaintEffect, UNINITIALIZED_TAINT_KEY, type MachineTaint } from './taint.ts';

/** Upstream `MaxItems` of every taints list. */
export const MAX_TAINTS = 64;
/** Key whose use is refused on worker Machines, MachineSets and MachineDeployments. */
export const CONTROL_PLANE_TAINT_KEY = 'node-role.kubernetes.io/control-plane';

const KEY_PATTERN =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const EFFECTS: readonly string[] = Object.values(TaintEffect);
const PROPAGATIONS: readonly string[] = Object.values(Propagation);

/** Which rules apply: the control-plane key is refused on workers (no `cluster.x-k8s.io/control-plane` label). */
export interface ValidationContext {
  readonly worker: boolean;
}

/** The outcome of validating a list: the typed taints when valid, the issues otherwise. */
export type ValidationResult =
  | { readonly valid: true; readonly taints: readonly MachineTaint[] }
  | { readonly valid: false; readonly issues: readonly DeclarationIssue[] };

/**
 * Validates a taints list as stored in `spec.taints` (`undefined` = field absent = no taints); an item's issues name
 * `positions[i]` (its entry in an annotation) when given, else its index. Returns the typed taints, or every issue.
 * @example validateMachineTaints([{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }], { worker: true }).valid // true
 */
export function validateMachineTaints(
  raw: unknown,
  context: ValidationContext,
  path = 'spec.taints',
  positions?: readonly number[],
): ValidationResult {
  if (raw === undefined || raw === null) return { valid: true, taints: [] };
  if (!Array.isArray(raw)) return { valid: false, issues: [{ field: path, rule: 'type', message: `Invalid value: ${quote(raw)}: must be a list` }] };
  const issues: DeclarationIssue[] = [];
  if (raw.length === 0) issues.push({ field: path, rule: 'minItems', message: 'must have at least 1 item when set (omit the field for no taints)' });
  if (raw.length > MAX_TAINTS) issues.push({ field: path, rule: 'maxItems', message: `must have at most ${MAX_TAINTS} items, has ${raw.length}` });
  const seen = new Set<string>();
  raw.forEach((item: unknown, i) => {
    const at = `${path}[${positions?.[i] ?? i}]`;
    issues.push(...validateMachineTaint(item, context, at));
    if (isRecord(item) && typeof item.key === 'string' && typeof item.effect === 'string') {
      const id = `${item.key}:${item.effect}`;
      const message = `Duplicate value: ${JSON.stringify(id)}: key and effect must be unique`;
      if (seen.has(id)) issues.push({ field: at, rule: 'unique', message });
      seen.add(id);
    }
  });
  if (issues.length > 0) return { valid: false, issues };
  const taint = ({ key, effect, propagation, value }: MachineTaint) => ({ key, effect, propagation, value });
  return { valid: true, taints: (raw as MachineTaint[]).map(taint) };
}

/** Validates one taint; returns its issues (empty when valid). */
export function validateMachineTaint(raw: unknown, context: ValidationContext, path: string): DeclarationIssue[] {
  if (!isRecord(raw)) return [{ field: path, rule: 'type', message: `Invalid value: ${quote(raw)}: must be an object` }];
  const issues: DeclarationIssue[] = [];
  const { key, value, effect, propagation } = raw;
  if (typeof key !== 'string' || key === '') {
    issues.push({ field: `${path}.key`, rule: 'required', message: key === undefined ? 'Required value' : `Invalid value: ${quote(key)}: is required` });
  } else {
    issues.push(...validateKey(key, context, `${path}.key`));
  }
  if (value !== undefined) {
    if (typeof value !== 'string') issues.push({ field: `${path}.value`, rule: 'type', message: `Invalid value: ${quote(value)}: must be a string` });
    else if (value === '') issues.push({ field: `${path}.value`, rule: 'minLength', message: 'Invalid value: "": must not be empty when set (omit it for no value)' });
    else if (value.length > 63) issues.push({ field: `${path}.value`, rule: 'maxLength', message: `Invalid value: ${quote(value)}: must be at most 63 characters, has ${value.length}` });
    else if (!QUALIFIED_NAME.test(value)) {
      issues.push({ field: `${path}.value`, rule: 'pattern', message: `Invalid value: ${quote(value)}: must consist of alphanumerics, "-", "_" or ".", and start and end with an alphanumeric` });
    }
  }
  if (effect === undefined || effect === '') issues.push({ field: `${path}.effect`, rule: 'required', message: 'Required value' });
  else if (typeof effect !== 'string' || !EFFECTS.includes(effect)) {
    issues.push({ field: `${path}.effect`, rule: 'enum', message: `Unsupported value: ${quote(effect)}: supported values: ${EFFECTS.map(quote).join(', ')}` });
  }
  if (propagation === undefined || propagation === '') issues.push({ field: `${path}.propagation`, rule: 'required', message: 'Required value' });
  else if (typeof propagation !== 'string' || !PROPAGATIONS.includes(propagation)) {
    issues.push({ field: `${path}.propagation`, rule: 'enum', message: `Unsupported value: ${quote(propagation)}: supported values: ${PROPAGATIONS.map(quote).join(', ')}` });
  }
  return issues;
}

/** Key rules: CRD length + pattern, then the webhook's reserved keys, label-key syntax and worker rule. */
function validateKey(key: string, context: ValidationContext, field: string): DeclarationIssue[] {
  const issues: DeclarationIssue[] = [];
  if (key.length > 317) issues.push({ field, rule: 'maxLength', message: `must be at most 317 characters, has ${key.length}` });
  if (!KEY_PATTERN.test(key)) issues.push({ field, rule: 'pattern', message: 'must be an optional DNS subdomain prefix and "/", followed by a name' });
  const reserved = reservedKeyMessage(key);
  if (reserved) issues.push({ field, rule: 'reserved', message: reserved });
  issues.push(...labelKeyIssues(key, field));
  if (context.worker && key === CONTROL_PLANE_TAINT_KEY) {
    issues.push({ field, rule: 'worker', message: 'taint is not allowed for worker Machines' });
  }
  return issues.map((issue) => ({ ...issue, message: `Invalid value: ${quote(key)}: ${issue.message}` }));
}

/** Upstream's reserved-key checks, at most one, in upstream's order. */
function reservedKeyMessage(key: string): string | undefined {
  if (key === UNINITIALIZED_TAINT_KEY || key === OUTDATED_REVISION_TAINT_KEY) return 'taint key is not allowed';
  if (key.startsWith('node.kubernetes.io/') && key !== 'node.kubernetes.io/out-of-service') {
    return 'taint key must not have the prefix node.kubernetes.io/, except for node.kubernetes.io/out-of-service';
  }
  if (key.startsWith('node.cloudprovider.kubernetes.io/')) return 'taint key must not have the prefix node.cloudprovider.kubernetes.io/';
  if (key === 'node-role.kubernetes.io/master') return 'taint is deprecated since 1.24 and should not be used anymore';
  return undefined;
}

/** Kubernetes label-key syntax (apimachinery IsLabelKey / IsQualifiedName); returns the issues, empty when valid. */
export function labelKeyIssues(key: string, field: string): DeclarationIssue[] {
  const slash = key.indexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (name.includes('/')) {
    return [{ field, rule: 'labelKey', message: 'a qualified name must consist of an optional prefix and a name separated by at most one "/"' }];
  }
  const issues: DeclarationIssue[] = [];
  if (prefix !== undefined) {
    if (prefix === '') issues.push({ field, rule: 'labelKey', message: 'prefix part must be non-empty' });
    else if (prefix.length > 253) issues.push({ field, rule: 'labelKey', message: 'prefix part must be no more than 253 characters' });
    else if (!DNS1123_SUBDOMAIN.test(prefix)) issues.push({ field, rule: 'labelKey', message: 'prefix part must be a lowercase DNS-1123 subdomain' });
  }
  if (name === '') issues.push({ field, rule: 'labelKey', message: 'name part must be non-empty' });
  else if (name.length > 63) issues.push({ field, rule: 'labelKey', message: 'name part must be no more than 63 characters' });
  else if (!QUALIFIED_NAME.test(name)) {
    issues.push({ field, rule: 'labelKey', message: 'name part must consist of alphanumerics, "-", "_" or ".", and start and end with an alphanumeric' });
  }
  return issues;
}

/**
 * The offending value as the API server quotes it: JSON, cut after 64 characters.
 * @example quote('NoSchedul') // '"NoSchedul"'
 */
export function quote(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 64 ? `${text.slice(0, 61)}...` : text;
}

/** True for a JSON object (not null, not an array). */
export function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
