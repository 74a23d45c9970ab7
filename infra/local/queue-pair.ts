import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { requireInteger } from './option-checks.ts';

/** Longer than any source queue's retention, so dead letters do not expire first (docs/architecture.md, reliability idea 5). */
const DEAD_LETTER_RETENTION_SECONDS = 1_209_600;

/**
 * FIFO with high throughput, as the stack makes the events queue and its dead-letter queue: the
 * message groups are records (docs/architecture.md), the senders set every deduplication id.
 */
const FIFO_ATTRIBUTES = {
  FifoQueue: 'true',
  ContentBasedDeduplication: 'false',
  DeduplicationScope: 'messageGroup',
  FifoThroughputLimit: 'perMessageGroupId',
};

/** How SQS tells a FIFO queue's name (and so its ARN) from a standard one's. */
export const FIFO_SUFFIX = '.fifo';

/**
 * Creates the events queue and its dead-letter queue with a redrive policy, as the stack does:
 * FIFO queues, unless `fifo: false` asks for standard ones.
 *
 * @example
 * const pair = await createQueuePair(sqs, { name: 'events', maxReceiveCount: 5, visibilityTimeoutSeconds: 180 });
 */
export async function createQueuePair(
  sqs: SQSClient,
  options: {
    /**
     * Events queue name; the DLQ is `${name}-dlq`. FIFO queues take the `.fifo` suffix after
     * that (`events.fifo`, `events-dlq.fifo`).
     */
    name: string;
    /** Redrive after this many receives. */
    maxReceiveCount: number;
    visibilityTimeoutSeconds: number;
    /** Default true; false for standard queues. */
    fifo?: boolean;
  },
): Promise<{
  queueUrl: string;
  queueArn: string;
  deadLetterQueueUrl: string;
  deadLetterQueueArn: string;
}> {
  const { name, maxReceiveCount, visibilityTimeoutSeconds, fifo = true } = options;
  requireInteger('maxReceiveCount', maxReceiveCount, 1, 1_000);
  requireInteger('visibilityTimeoutSeconds', visibilityTimeoutSeconds, 0, 43_200);
  const [suffix, kind] = fifo ? [FIFO_SUFFIX, FIFO_ATTRIBUTES] : ['', {}];

  const deadLetterQueueUrl = await createQueue(sqs, `${name}-dlq${suffix}`, {
    ...kind,
    MessageRetentionPeriod: String(DEAD_LETTER_RETENTION_SECONDS),
  });
  const deadLetterQueueArn = await queueArnOf(sqs, deadLetterQueueUrl);
  const queueUrl = await createQueue(sqs, `${name}${suffix}`, {
    ...kind,
    VisibilityTimeout: String(visibilityTimeoutSeconds),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: deadLetterQueueArn, maxReceiveCount }),
  });
  const queueArn = await queueArnOf(sqs, queueUrl);
  return { queueUrl, queueArn, deadLetterQueueUrl, deadLetterQueueArn };
}

async function createQueue(
  sqs: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<string> {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
  );
  if (QueueUrl === undefined) throw new Error(`CreateQueue ${name} answered without a QueueUrl`);
  return QueueUrl;
}

async function queueArnOf(sqs: SQSClient, queueUrl: string): Promise<string> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  const arn = Attributes?.QueueArn;
  if (arn === undefined)
    throw new Error(`GetQueueAttributes ${queueUrl} answered without a QueueArn`);
  return arn;
}
