/** The time source; injected so that domain and use cases stay deterministic under test. */
export interface Clock {
  now(): Date;
}
