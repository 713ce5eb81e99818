/** When the product was first enabled; Nodes created before then are adopted without OnInitialization taints. */
export interface EnablementState {
  /** Returns the first-enablement time (recording it on the very first call, where the adapter stores it). */
  enabledAt(): Promise<Date>;
}
