/**
 * An SQS server in this process, spoken to over its wire protocol: fauxqs (npm, MIT) listening on loopback, reached
 * by the real `@aws-sdk/client-sqs`. It holds the event queue (FIFO) and its FIFO dead-letter queue with a redrive
 * policy, created through CreateQueue exactly as `infra/queues.yml` declares them in AWS.
 *
 * Not durable: every message lives in this process's memory and is gone when it exits (or is killed). A test that
 * restarts the pipeline over the same messages keeps one `LocalSqs` alive and hands it to each pipeline.
 */
import type { AddressInfo } from 'node:net';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient, type QueueAttributeName } from '@aws-sdk/client-sqs';
import { buildApp } from 'fauxqs';

/** A queue of the local server. */
export interface LocalQueue {
  readonly name: string;
  readonly url: string;
  readonly arn: string;
}

/** What GetQueueAttributes reports for one queue. */
export interface QueueDepth {
  /** ApproximateNumberOfMessages: waiting to be received. */
  readonly visible: number;
  /** ApproximateNumberOfMessagesNotVisible: received and not yet deleted (in flight). */
  readonly inFlight: number;
  /** ApproximateNumberOfMessagesDelayed. */
  readonly delayed: number;
}

export interface LocalSqsOptions {
  /** Event queue name; must end in `.fifo`. Default `capi-taint-propagator-events.fifo`. */
  readonly queueName?: string;
  /** Dead-letter queue name; must end in `.fifo`. Default `capi-taint-propagator-events-dlq.fifo`. */
  readonly deadLetterQueueName?: string;
  /** Visibility timeout of the event queue in seconds (default 30). */
  readonly visibilityTimeoutSeconds?: number;
  /** Receives before SQS moves a message to the dead-letter queue (default 5). */
  readonly maxReceiveCount?: number;
  /** Region of the queues (their URLs and ARNs); default `eu-west-1`. */
  readonly region?: string;
}

/** The running server, its client and its two queues. */
export interface LocalSqs {
  /** `http://127.0.0.1:<port>`: the endpoint of every client of this server. */
  readonly endpoint: string;
  readonly region: string;
  /** A real SQSClient pointed at the server. */
  readonly client: SQSClient;
  readonly queue: LocalQueue;
  readonly deadLetterQueue: LocalQueue;
  /** A new SQSClient for this server (e.g. one per simulated process). */
  newClient(): SQSClient;
  /** GetQueueAttributes of a queue of this server. */
  depth(queue: LocalQueue): Promise<QueueDepth>;
  /** Closes every connection and the server; the messages are lost. Idempotent. */
  stop(): Promise<void>;
}

const DEFAULT_QUEUE = 'capi-taint-propagator-events.fifo';
const DEFAULT_DLQ = 'capi-taint-propagator-events-dlq.fifo';
/** Any credentials are accepted by the local server; static ones keep the SDK from searching a real chain. */
const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

/** Starts the server on a free loopback port and creates the queue pair. */
export async function startLocalSqs(options: LocalSqsOptions = {}): Promise<LocalSqs> {
  const queueName = options.queueName ?? DEFAULT_QUEUE;
  const dlqName = options.deadLetterQueueName ?? DEFAULT_DLQ;
  for (const name of [queueName, dlqName]) {
    if (!name.endsWith('.fifo')) throw new RangeError(`Queue name ${JSON.stringify(name)} must end in ".fifo" (the product uses FIFO queues only)`);
  }
  const region = options.region ?? 'eu-west-1';
  // buildApp rather than startFauxqs: startFauxqs listens on 0.0.0.0; this server must be reachable from loopback only.
  const app = buildApp({ logger: false, defaultRegion: region });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;
  const clients: SQSClient[] = [];
  // An explicit endpoint also keeps the SDK from sending to the queue URL's host (sqs.<region>.localhost).
  const newClient = (): SQSClient => {
    const client = new SQSClient({ endpoint, region, credentials: LOCAL_CREDENTIALS, maxAttempts: 3 });
    clients.push(client);
    return client;
  };
  const client = newClient();
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      for (const c of clients) c.destroy();
      await app.close();
    })());
  try {
    const createFifo = async (name: string, attributes: Record<string, string>): Promise<LocalQueue> => {
      const created = await client.send(new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true', ...attributes } }));
      const url = created.QueueUrl ?? '';
      const attrs = await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }));
      return { name, url, arn: attrs.Attributes?.['QueueArn'] ?? '' };
    };
    // As infra/queues.yml: ids set by the sender on the event queue, content-based ids on the dead-letter queue.
    const deadLetterQueue = await createFifo(dlqName, { ContentBasedDeduplication: 'true', MessageRetentionPeriod: '1209600' });
    const queue = await createFifo(queueName, {
      ContentBasedDeduplication: 'false',
      VisibilityTimeout: String(options.visibilityTimeoutSeconds ?? 30),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: deadLetterQueue.arn, maxReceiveCount: options.maxReceiveCount ?? 5 }),
    });
    return {
      endpoint,
      region,
      client,
      queue,
      deadLetterQueue,
      newClient,
      async depth(q: LocalQueue): Promise<QueueDepth> {
        const out = await client.send(
          new GetQueueAttributesCommand({
            QueueUrl: q.url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
          }),
        );
        const n = (name: QueueAttributeName): number => Number(out.Attributes?.[name] ?? 0);
        return { visible: n('ApproximateNumberOfMessages'), inFlight: n('ApproximateNumberOfMessagesNotVisible'), delayed: n('ApproximateNumberOfMessagesDelayed') };
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
