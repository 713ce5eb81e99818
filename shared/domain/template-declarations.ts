/**
 * A MachineSet's template declarations and the MachineSet that controls a Machine. Pure.
 *
 * The forwarder no longer reads templates ahead of Cluster API's copy (issue 48: the Machine is the source of truth).
 * `withTemplateDeclarations` is kept only for the reconcile function's `template` path, which goes with it; the
 * controller owner reference is read by the Machine store.
 */
import { DECLARATION_ANNOTATIONS } from './declaration-keys.ts';

/** The declaration annotations of `annotations` (only the keys of DECLARATION_ANNOTATIONS that are set). */
function declarationAnnotationsOf(annotations: Readonly<Record<string, string>>): Record<string, string> {
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
