/**
 * Declarations ahead of Cluster API's copy (docs/declaring-taints.md, "From a MachineDeployment").
 *
 * Cluster API copies every annotation of a MachineSet's `spec.template.metadata.annotations` onto each live Machine of
 * the set (in-place propagation: server-side apply with forced ownership, so the template's value wins over any other
 * value of that key on the Machine). It does so one Machine after another, and an annotation change costs it three
 * writes per Machine (the Machine, its infrastructure machine and its bootstrap config) where a `spec.taints` change
 * costs one: at 500 Machines the last Machine gets a MachineDeployment's annotation seconds after the MachineSet's
 * template has it. The product therefore reads a declaration annotation that the Machine's own MachineSet template
 * sets from the template: the value the Machine is about to get. A key the template does not set is read from the
 * Machine (a value set on that Machine alone, or one Cluster API is still to remove). Pure.
 */
import { DECLARATION_ANNOTATIONS } from './declaration-keys.ts';

/** The declaration annotations of `annotations` (only the keys of DECLARATION_ANNOTATIONS that are set). */
export function declarationAnnotationsOf(annotations: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of DECLARATION_ANNOTATIONS) if (annotations[key] !== undefined) out[key] = annotations[key];
  return out;
}

/**
 * A Machine's annotations as Cluster API is about to make them: every declaration annotation its MachineSet's template
 * sets, with the template's value; everything else as on the Machine.
 * @example withTemplateDeclarations({ [MACHINE]: 'a=v1:NoSchedule' }, { [MACHINE]: 'a=v2:NoSchedule' })[MACHINE] // 'a=v2:NoSchedule'
 */
export function withTemplateDeclarations(machineAnnotations: Readonly<Record<string, string>>, templateAnnotations: Readonly<Record<string, string>>): Record<string, string> {
  return { ...machineAnnotations, ...declarationAnnotationsOf(templateAnnotations) };
}

/**
 * True when the template sets a declaration annotation the Machine does not carry with that value yet (Cluster API's
 * copy is still to come).
 * @example templateAhead({}, { [MACHINE]: 'a:NoSchedule' }) // true
 */
export function templateAhead(machineAnnotations: Readonly<Record<string, string>>, templateAnnotations: Readonly<Record<string, string>>): boolean {
  return Object.entries(declarationAnnotationsOf(templateAnnotations)).some(([key, value]) => machineAnnotations[key] !== value);
}

/**
 * True when a change of a MachineSet template's declaration annotations (`before` → `after`, each the template's
 * declaration annotations, empty for none) changes what a Machine of it with the declaration annotations `machine`
 * declares; without `machine`, when it can change that of any Machine (the template's declarations differ).
 * @example templateChangeConcerns({ [MACHINE]: 'a=1:NoSchedule' }, { [MACHINE]: 'a=2:NoSchedule' }, { [MACHINE]: 'a=2:NoSchedule' }) // true: the Machine got the copy first
 */
export function templateChangeConcerns(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>, machine: Readonly<Record<string, string>> | undefined): boolean {
  const was = machine === undefined ? declarationAnnotationsOf(before) : withTemplateDeclarations(declarationAnnotationsOf(machine), before);
  const is = machine === undefined ? declarationAnnotationsOf(after) : withTemplateDeclarations(declarationAnnotationsOf(machine), after);
  const keys = new Set([...Object.keys(was), ...Object.keys(is)]);
  return [...keys].some((k) => was[k] !== is[k]);
}

/**
 * The name of the MachineSet that controls an object (its controller owner reference of kind MachineSet), from
 * `metadata.ownerReferences` as stored; undefined when none.
 */
export function controllerMachineSetOf(ownerReferences: unknown): string | undefined {
  if (!Array.isArray(ownerReferences)) return undefined;
  for (const ref of ownerReferences) {
    if (typeof ref !== 'object' || ref === null) continue;
    const { kind, name, controller, apiVersion } = ref as Record<string, unknown>;
    if (kind === 'MachineSet' && controller === true && typeof name === 'string' && name !== '' && typeof apiVersion === 'string' && apiVersion.startsWith('cluster.x-k8s.io/')) return name;
  }
  return undefined;
}
