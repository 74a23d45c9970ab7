/**
 * fauxqs, the in-process SQS emulator (with its FIFO fixes, infra/local/fauxqs-fifo.ts), for
 * tests: start it on a free port, build clients that reach it, and look at queues with the SDK
 * the way an operator would.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  GetQueueAttributesCommand,
  type Message,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { startFauxqsFifoFixed } from '../../infra/local/fauxqs-fifo.ts';

export interface LocalSqs {
  /** `http://127.0.0.1:<port>`. */
  endpoint: string;
  /** A client for it; destroyed by stop(). */
  sqs: SQSClient;
  stop(): Promise<void>;
}

/** Starts fauxqs on 127.0.0.1 and a free port. */
export async function startLocalSqs(): Promise<LocalSqs> {
  const server = await startFauxqsFifoFixed({ port: 0, logger: false });
  const endpoint = `http://127.0.0.1:${server.port}`;
  const sqs = sqsClient(endpoint);
  return {
    endpoint,
    sqs,
    async stop() {
      sqs.destroy();
      await server.stop();
    },
  };
}

/**
 * A client for the emulator. The endpoint must be explicit: queue URLs name
 * `sqs.us-east-1.localhost`, which does not resolve here.
 */
export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
}

/** A queue name no other test uses. */
export function uniqueQueueName(prefix = 'q'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** A message for a FIFO queue: its body, its message group and its deduplication id. */
interface FifoBody {
  body: string;
  groupId: string;
  /** Default: unique per send. */
  deduplicationId?: string;
}

/**
 * Sends the bodies (SendMessageBatch in groups of 10) and returns the message ids in order. On a
 * FIFO queue (`.fifo`) a bare body is a message group of its own, so the bodies come out as
 * from a standard queue; a FifoBody (a queue message `queueMessageFor` made fits) names its group.
 */
export async function sendBodies(
  sqs: SQSClient,
  queueUrl: string,
  bodies: ReadonlyArray<string | FifoBody>,
  messageAttributes?: Record<string, MessageAttributeValue>,
): Promise<string[]> {
  const fifo = queueUrl.endsWith('.fifo');
  const ids: string[] = [];
  for (let start = 0; start < bodies.length; start += 10) {
    const group = bodies.slice(start, start + 10);
    const { Successful = [], Failed = [] } = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: group.map((entry, index) => {
          const {
            body,
            groupId = randomUUID(),
            deduplicationId = randomUUID(),
          } = typeof entry === 'string' ? { body: entry } : entry;
          return {
            Id: String(index),
            MessageBody: body,
            ...(fifo ? { MessageGroupId: groupId, MessageDeduplicationId: deduplicationId } : {}),
            ...(messageAttributes === undefined ? {} : { MessageAttributes: messageAttributes }),
          };
        }),
      }),
    );
    if (Failed.length > 0) throw new Error(`SendMessageBatch failed: ${JSON.stringify(Failed)}`);
    const byEntry = new Map(Successful.map((entry) => [entry.Id, entry.MessageId]));
    for (const index of group.keys()) {
      const id = byEntry.get(String(index));
      if (id === undefined) throw new Error(`SendMessageBatch did not answer entry ${index}`);
      ids.push(id);
    }
  }
  return ids;
}

/** Visible and in-flight message counts (ApproximateNumberOfMessages / ...NotVisible). */
export async function queueCounts(
  sqs: SQSClient,
  queueUrl: string,
): Promise<{ visible: number; inFlight: number }> {
  const { Attributes = {} } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return {
    visible: Number(Attributes.ApproximateNumberOfMessages),
    inFlight: Number(Attributes.ApproximateNumberOfMessagesNotVisible),
  };
}

/**
 * Receives until `count` distinct messages arrived or `timeoutMs` passed, and returns what came
 * (with system attributes and message attributes). The messages stay in the queue, in flight.
 */
export async function receiveUntil(
  sqs: SQSClient,
  queueUrl: string,
  count: number,
  { timeoutMs }: { timeoutMs: number },
): Promise<Message[]> {
  const deadline = Date.now() + timeoutMs;
  const received = new Map<string, Message>();
  while (received.size < count && Date.now() < deadline) {
    const waitSeconds = Date.now() + 1_000 <= deadline ? 1 : 0;
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.min(10, count - received.size),
        WaitTimeSeconds: waitSeconds,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    for (const message of Messages) {
      // The first copy counts: a later one is this test's own receive coming back.
      const id = message.MessageId ?? '';
      if (!received.has(id)) received.set(id, message);
    }
    if (Messages.length === 0 && waitSeconds === 0) await sleep(50);
  }
  return [...received.values()];
}
