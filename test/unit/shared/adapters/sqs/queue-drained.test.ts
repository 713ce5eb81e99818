import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { sqsQueueDrained } from '#shared/adapters/sqs/queue-drained.ts';

const sqsMock = mockClient(SQSClient);
const URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo';

describe('Function: sqsQueueDrained()', () => {
  beforeEach(() => sqsMock.reset());

  it.each([
    { name: 'empty', attributes: { ApproximateNumberOfMessages: '0', ApproximateNumberOfMessagesNotVisible: '0', ApproximateNumberOfMessagesDelayed: '0' }, want: true },
    { name: 'a visible message', attributes: { ApproximateNumberOfMessages: '1', ApproximateNumberOfMessagesNotVisible: '0', ApproximateNumberOfMessagesDelayed: '0' }, want: false },
    { name: 'a message in flight (being reconciled)', attributes: { ApproximateNumberOfMessages: '0', ApproximateNumberOfMessagesNotVisible: '2', ApproximateNumberOfMessagesDelayed: '0' }, want: false },
    { name: 'a delayed message', attributes: { ApproximateNumberOfMessages: '0', ApproximateNumberOfMessagesNotVisible: '0', ApproximateNumberOfMessagesDelayed: '1' }, want: false },
  ])('is $want for a queue with $name', async ({ attributes, want }) => {
    // Prepare
    sqsMock.on(GetQueueAttributesCommand).resolves({ Attributes: attributes });

    // Act
    const drained = await sqsQueueDrained(new SQSClient({ region: 'eu-west-1' }), URL)();

    // Assess
    expect(drained).toBe(want);
    expect(sqsMock.commandCalls(GetQueueAttributesCommand)[0]?.args[0].input).toEqual({
      QueueUrl: URL,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
    });
  });
});
