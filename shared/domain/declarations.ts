/**
 * Where a Machine's taints come from (docs/declaring-taints.md): `spec.taints` and three annotations (`@Preview`
 * entries reported, never applied: issue 51), merged by key+effect with a fixed precedence, validated as upstream does.
 */
import type { DeclarationIssue } from '#shared/errors.ts';
import { DECLARATION_ANNOTATIONS, type DeclarationAnnotation } from './declaration-keys.ts';
import { CONTROL_PLANE_LABEL, Propagation, TaintEffect, taintId, type MachineTaint, type TaintId } from './taint.ts';
import { MAX_TAINTS, quote, validateMachineTaint, validateMachineTaints } from './validation.ts';

/** A source of declarations, from lowest to highest precedence: the annotations, then `spec.taints`. */
export type DeclarationSource = DeclarationAnnotation | 'spec.taints';

/** The annotation suffix of a preview-only declaration: `maintenance=true:NoExecute@Preview`. */
export const PREVIEW_SUFFIX = 'Preview';

/** One parsed annotation entry; `preview` for a `@Preview` entry (its taint then carries propagation `Always`). */
export type AnnotationEntry =
  | { readonly kind: 'declare'; readonly taint: Record<string, string>; readonly preview?: true }
  | ({ readonly kind: 'cancel' } & TaintId);

/** A declaration of a lower source that a higher source replaced or cancelled. */
export interface Override {
  readonly id: string;
  readonly source: DeclarationSource;
  readonly by: DeclarationSource;
  readonly cancelled: boolean;
}

/** A preview-only declaration (`@Preview`): a NoExecute taint whose evictions are reported, never applied. */
export type PreviewTaint = Omit<MachineTaint, 'propagation'>;

/** The Machine's effective taints, their sources and what was overridden; `@Preview` ones are only in `previews`. */
export interface EffectiveDeclaration {
  readonly taints: readonly MachineTaint[];
  readonly previews: readonly PreviewTaint[];
  readonly sourceOf: Readonly<Record<string, DeclarationSource>>;
  readonly overrides: readonly Override[];
}

/** Options of `declaredTaintsOf`: the configured startup gate taint, whose declaration is refused. */
export interface DeclarationOptions {
  readonly startupTaint?: TaintId;
}

export type DeclarationResult =
  | { readonly valid: true; readonly declaration: EffectiveDeclaration }
  | { readonly valid: false; readonly issues: readonly DeclarationIssue[] };

const ENTRY = /^(?<key>[^=:@]*)(?:=(?<value>[^:@]*))?:(?<effect>[^:@-]*)(?:@(?<propagation>[^@]*))?$/;
const CANCEL = /^(?<key>[^=:@]*):(?<effect>[^:@]*)-$/;

/**
 * Parses one declaration annotation. Returns the entries, and an issue per entry not of the documented syntax.
 * @example parseTaintAnnotation('gpu=a100:NoSchedule, spot:PreferNoSchedule@OnInitialization', 'a').entries.length // 2
 */
export function parseTaintAnnotation(value: string, annotation: string): { entries: AnnotationEntry[]; issues: DeclarationIssue[] } {
  const entries: AnnotationEntry[] = [];
  const issues: DeclarationIssue[] = [];
  const field = `metadata.annotations[${annotation}]`;
  const trimmed = value.trim();
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    // Pasted JSON or YAML flow syntax: one syntax error, not one issue per fragment between commas.
    return {
      entries,
      issues: [{ field, rule: 'syntax', message: `Invalid value: ${quote(trimmed)}: looks like JSON; write comma-separated key[=value]:Effect[@Propagation] entries, e.g. "gpu=a100:NoSchedule,spot:PreferNoSchedule@OnInitialization"` }],
    };
  }
  value.split(',').forEach((rawEntry, i) => {
    const entry = rawEntry.trim();
    if (entry === '') {
      if (trimmed !== '') issues.push({ field: `${field}[${i}]`, rule: 'syntax', message: 'empty entry' });
      return;
    }
    const cancel = CANCEL.exec(entry)?.groups;
    if (cancel) {
      entries.push({ kind: 'cancel', key: cancel.key ?? '', effect: cancel.effect ?? '' });
      return;
    }
    const m = ENTRY.exec(entry)?.groups;
    if (!m) {
      issues.push({ field: `${field}[${i}]`, rule: 'syntax', message: `Invalid value: ${quote(entry)}: is not key[=value]:Effect[@Propagation] or key:Effect-` });
      return;
    }
    // `@Preview` is validated as an Always declaration (key, value, effect), then kept out of the applied taints.
    const preview = m.propagation === PREVIEW_SUFFIX;
    const taint: Record<string, string> = { key: m.key ?? '', effect: m.effect ?? '', propagation: preview ? Propagation.Always : (m.propagation ?? Propagation.Always) };
    if (m.value !== undefined) taint.value = m.value;
    entries.push(preview ? { kind: 'declare', taint, preview: true } : { kind: 'declare', taint });
  });
  return { entries, issues };
}

/**
 * Computes a Machine's effective taints from all sources (`spec.taints` > `…/machine` > `…/cluster` > `…/class`).
 * Returns the merged declaration, or every issue of every source (an invalid source never yields a partial one).
 */
export function declaredTaintsOf(
  machine: { readonly specTaints: unknown; readonly annotations: Readonly<Record<string, string>>; readonly labels: Readonly<Record<string, string>> },
  options: DeclarationOptions = {},
): DeclarationResult {
  const context = { worker: !Object.hasOwn(machine.labels, CONTROL_PLANE_LABEL) };
  const issues: DeclarationIssue[] = [];
  const layers: { source: DeclarationSource; declares: MachineTaint[]; cancels: TaintId[]; previews: ReadonlySet<string> }[] = [];

  for (const annotation of DECLARATION_ANNOTATIONS) {
    const value = machine.annotations[annotation];
    if (value === undefined) continue;
    const parsed = parseTaintAnnotation(value, annotation);
    issues.push(...parsed.issues);
    // An annotation with a syntax error is reported by its syntax errors alone: its other entries are not judged.
    if (parsed.issues.length > 0) continue;
    const field = `metadata.annotations[${annotation}]`;
    const declared = parsed.entries.flatMap((e, position) => (e.kind === 'declare' ? [{ taint: e.taint, position, preview: e.preview === true }] : []));
    for (const d of declared) {
      // A NoSchedule or PreferNoSchedule taint evicts nothing: a preview of one would always be empty.
      if (d.preview && d.taint.effect !== TaintEffect.NoExecute) {
        issues.push({ field: `${field}[${d.position}]`, rule: 'preview', message: `Invalid value: ${quote(`@${PREVIEW_SUFFIX}`)}: only a NoExecute taint can be previewed (it is the only effect that evicts pods)` });
      }
    }
    const declares = declared.map((d) => d.taint);
    const cancels = parsed.entries.flatMap((e, position) => (e.kind === 'cancel' ? [{ key: e.key, effect: e.effect, position }] : []));
    // Issues name the entry's position in the annotation (cancel entries included), not its index among declarations.
    const positions = declared.map((d) => d.position);
    // An annotation of cancels only declares nothing: no list, so no minItems issue.
    const checked = validateMachineTaints(declares.length > 0 ? declares : undefined, context, field, positions);
    if (!checked.valid) issues.push(...checked.issues);
    for (const c of cancels) {
      const at = `${field}[${c.position}]`;
      issues.push(...validateMachineTaint({ key: c.key, effect: c.effect, propagation: Propagation.Always }, { worker: false }, at));
      if (declares.some((d) => d.key === c.key && d.effect === c.effect)) {
        issues.push({ field: at, rule: 'unique', message: `${taintId(c)} is both declared and cancelled` });
      }
    }
    const previews = new Set(declared.filter((d) => d.preview).map((d) => taintId({ key: d.taint.key ?? '', effect: d.taint.effect ?? '' })));
    layers.push({ source: annotation, declares: checked.valid ? [...checked.taints] : [], cancels, previews });
  }
  const spec = validateMachineTaints(machine.specTaints, context);
  if (!spec.valid) issues.push(...spec.issues);
  else layers.push({ source: 'spec.taints', declares: [...spec.taints], cancels: [], previews: new Set() });
  if (issues.length > 0) return { valid: false, issues };

  const chosen = new Map<string, { taint: MachineTaint; source: DeclarationSource }>();
  const overrides: Override[] = [];
  for (const layer of layers) {
    for (const c of layer.cancels) {
      const previous = chosen.get(taintId(c));
      if (previous) overrides.push({ id: taintId(c), source: previous.source, by: layer.source, cancelled: true });
      chosen.delete(taintId(c));
    }
    for (const taint of layer.declares) {
      const previous = chosen.get(taintId(taint));
      if (previous) overrides.push({ id: taintId(taint), source: previous.source, by: layer.source, cancelled: false });
      chosen.set(taintId(taint), { taint, source: layer.source });
    }
  }
  // spec.taints first in their order, then the annotations from highest to lowest precedence.
  const taints: MachineTaint[] = [];
  const previews: PreviewTaint[] = [];
  const sourceOf: Record<string, DeclarationSource> = {};
  for (const layer of [...layers].reverse()) {
    for (const taint of layer.declares) {
      // Ids are unique within a source, so the winner of an id is met once.
      if (chosen.get(taintId(taint))?.source !== layer.source) continue;
      const { propagation: _propagation, ...preview } = taint;
      if (layer.previews.has(taintId(taint))) previews.push(preview);
      else taints.push(taint);
      sourceOf[taintId(taint)] = layer.source;
    }
  }
  const gate = options.startupTaint;
  const gated = gate ? taints.filter((t) => t.key === gate.key && t.effect === gate.effect) : [];
  if (gated.length > 0) {
    // The product removes the startup gate taint in every write; declaring it would make every reconcile write.
    return { valid: false, issues: gated.map((t) => ({ field: sourceOf[taintId(t)] ?? 'taints', rule: 'startupGate', message: `${taintId(t)} is the startup gate taint, which is removed when taints are applied; it cannot be declared` })) };
  }
  if (taints.length > MAX_TAINTS) {
    return { valid: false, issues: [{ field: 'taints', rule: 'maxItems', message: `all sources together declare ${taints.length} taints, at most ${MAX_TAINTS} are allowed` }] };
  }
  return { valid: true, declaration: { taints, previews, sourceOf, overrides } };
}
