/**
 * Each request's messages have deduplication ids of their own: two requests of one sender
 * handled in the same millisecond, with the same event id for the same record, are both queued
 * on a FIFO queue (which drops a message whose deduplication id it saw within five minutes), so
 * no event answered 202 is lost. A send repeated within one request still queues it once.
 * Through the real ingest and SQS adapter, on fauxqs.
 */
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { API_KEY, httpApiEvent, ingestHandler } from '../support/ingest.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';

let localSqs: LocalSqs;

beforeAll(async () => {
  localSqs = await startLocalSqs();
});

afterAll(async () => {
  await localSqs.stop();
});

/** The events queue as infra/aws/storage.ts makes it: FIFO, high throughput. */
async function fifoQueue(): Promise<string> {
  const { QueueUrl } = await localSqs.sqs.send(
    new CreateQueueCommand({
      QueueName: `${uniqueQueueName('dedup-ids')}.fifo`,
      Attributes: {
        FifoQueue: 'true',
        ContentBasedDeduplication: 'false',
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
      },
    }),
  );
  if (!QueueUrl) throw new Error('CreateQueue answered no URL');
  return QueueUrl;
}

describe('two requests in one millisecond', () => {
  it('queues both events though they share the sender, the event id, the record and the time', async () => {
    const queueUrl = await fifoQueue();
    // One clock reading for both: the same receivedAt, to the millisecond.
    const handle = ingestHandler(new SqsEventQueue(localSqs.sqs, queueUrl));
    const post = (firstname: string) =>
      handle(
        httpApiEvent({
          body: JSON.stringify({
            entity: 'contacts',
            action: 'create',
            eventId: 'signup-1',
            data: { email: 'ann@example.com', firstname },
          }),
          headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
        }),
      );

    const answers = [await post('Ann'), await post('Anna')];

    expect(answers.map((answer) => answer.status)).toEqual([202, 202]);
    const messages = await receiveUntil(localSqs.sqs, queueUrl, 2, { timeoutMs: 3_000 });
    expect(messages.map((m) => JSON.parse(m.Body ?? '').data.firstname).sort()).toEqual([
      'Ann',
      'Anna',
    ]);
    expect((await queueCounts(localSqs.sqs, queueUrl)).visible).toBe(0);
  });
});
