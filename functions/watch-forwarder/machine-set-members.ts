/**
 * The forwarder's index of which Machines each MachineSet controls (a Machine's controller owner reference), so that a
 * change of a MachineSet's template declarations names the Machines it concerns without a scan of every Machine
 * (`#shared/domain/template-declarations.ts`). Names only: the Machine stream holds the facts. A stale entry (a Machine
 * that changed owner while the forwarder was away) costs one lookup; the caller checks the Machine's owner again.
 */
import type { MachineFacts } from '#shared/domain/watch-event.ts';

export class MachineSetMembers {
  /** `<namespace>/<machineSet>` → names of its Machines. */
  readonly #members = new Map<string, Set<string>>();

  /** Records a Machine change. */
  observe(previous: MachineFacts | undefined, current: MachineFacts, deleted: boolean): void {
    if (previous?.machineSet !== undefined && (deleted || previous.machineSet !== current.machineSet)) this.#remove(previous.namespace, previous.machineSet, previous.name);
    if (current.machineSet === undefined) return;
    if (deleted) {
      this.#remove(current.namespace, current.machineSet, current.name);
      return;
    }
    const key = `${current.namespace}/${current.machineSet}`;
    let names = this.#members.get(key);
    if (!names) this.#members.set(key, (names = new Set()));
    names.add(current.name);
  }

  /** The names of the Machines the MachineSet controls, as last seen. */
  of(namespace: string, machineSet: string): readonly string[] {
    return [...(this.#members.get(`${namespace}/${machineSet}`) ?? [])];
  }

  #remove(namespace: string, machineSet: string, name: string): void {
    const key = `${namespace}/${machineSet}`;
    const names = this.#members.get(key);
    if (!names) return;
    names.delete(name);
    if (names.size === 0) this.#members.delete(key);
  }
}
