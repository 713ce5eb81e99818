/** The queue a record came from, as the reconcile function needs it for retries and dead letters. */
export interface RecordQueue {
  /** Makes a received message visible again after `seconds`: the retry goes through the queue, with backoff. */
  retryAfter(receiptHandle: string, seconds: number): Promise<void>;
  /** Sends a record that can never succeed to the dead-letter queue, with its reason. */
  deadLetter(record: DeadLetterRecord, reason: string): Promise<void>;
  /**
   * Sends the record again as a fresh message (receive count 1) to the back of its group, before the redrive would
   * move a record that only ever failed for transient reasons (or was never attempted) to the dead-letter queue.
   */
  reissue(record: DeadLetterRecord): Promise<void>;
}

/** What is kept of a dead-lettered record. */
export interface DeadLetterRecord {
  readonly messageId: string;
  readonly body: string;
  readonly messageGroupId: string;
}
