/**
 * Whether an SQS queue holds no message at all (visible, in flight or delayed), from
 * GetQueueAttributes. The forwarder asks it when the queue is not durable (a local run's in-memory
 * queue) to know which of its progress has been applied, not merely queued.
 */
// The SDK is loaded on the first probe, not with the forwarder's module (only local runs have a non-durable queue).
import type { GetQueueAttributesCommand, GetQueueAttributesCommandOutput } from '@aws-sdk/client-sqs';
import { sqsSdk } from './sdk.ts';

/** The part of an SQS client this needs; SQSClient and the local queues' clients fit. */
export interface SqsAttributesClient {
  send(command: GetQueueAttributesCommand): Promise<Partial<GetQueueAttributesCommandOutput>>;
}

const COUNTS = ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'] as const;

/** Returns a probe that resolves true when the queue at `queueUrl` is empty. */
export function sqsQueueDrained(client: SqsAttributesClient, queueUrl: string): () => Promise<boolean> {
  return async () => {
    const { GetQueueAttributesCommand: Command } = await sqsSdk();
    const out = await client.send(new Command({ QueueUrl: queueUrl, AttributeNames: [...COUNTS] }));
    return COUNTS.every((name) => Number(out.Attributes?.[name] ?? '0') === 0);
  };
}
