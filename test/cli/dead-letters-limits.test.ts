/**
 * The dead-letter commands at SQS's limits, in fauxqs: a redrive moves letters that together pass
 * SendMessageBatch's 1 MiB; redrive and discard take "when they started" from SQS's clock, so an
 * operator's clock minutes off moves (discards) what is there, and what they leave is counted in
 * `left`; the list counts every letter while keeping only the newest `--limit`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listDeadLetters } from '../../infra/cli/dead-letters.ts';
import { discardDeadLetters } from '../../infra/cli/dead-letters-discard.ts';
import { redriveDeadLetters } from '../../infra/cli/redrive-letters.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  sqsClient,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';

let local: LocalSqs;

beforeAll(async () => {
  local = await startLocalSqs();
});

afterAll(async () => {
  await local.stop();
});

/** A FIFO queue as infra/aws/storage.ts makes it. */
async function fifoQueue(): Promise<string> {
  const { QueueUrl } = await local.sqs.send(
    new CreateQueueCommand({
      QueueName: `${uniqueQueueName('limits')}.fifo`,
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

interface Letter {
  eventId: string;
  reason?: string;
  /** When the batch function wrote it (relay.deadLetteredAt). Default: a minute ago. */
  deadLetteredAt?: number;
  /** Characters of padding in the event's data. */
  padding?: number;
  /** Attributes the event had on the events queue, kept by a redrive. */
  attributes?: Record<string, MessageAttributeValue>;
}

/** Writes dead letters as the batch function does, each in its record's own group. */
async function write(queueUrl: string, letters: Letter[]): Promise<void> {
  for (const letter of letters) {
    const { eventId, reason = 'mautic_rejected_item', padding = 0 } = letter;
    await local.sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: JSON.stringify({
          eventId,
          entity: 'contacts',
          action: 'edit',
          id: 1,
          data: { note: 'x'.repeat(padding) },
        }),
        MessageAttributes: {
          ...letter.attributes,
          'relay.reason': { DataType: 'String', StringValue: reason },
          'relay.deadLetteredAt': {
            DataType: 'String',
            StringValue: new Date(letter.deadLetteredAt ?? Date.now() - 60_000).toISOString(),
          },
        },
        MessageGroupId: `record-${eventId}`,
        MessageDeduplicationId: `dead-${eventId}`,
      }),
    );
  }
}

/** An operator's clock five minutes behind SQS's. */
const slowClock = () => Date.now() - 5 * 60_000;

function redrive(
  urls: { deadLetterQueueUrl: string; eventsQueueUrl: string },
  options: { now?: () => number; sqs?: SQSClient } = {},
) {
  return redriveDeadLetters(
    options.sqs ?? local.sqs,
    urls,
    { limit: 100 },
    {
      rate: 1000,
      dryRun: false,
      hideSeconds: 30,
      now: options.now ?? Date.now,
      sleep: (ms) => sleep(ms),
      shouldStop: () => false,
      progress: () => {},
      waiting: () => {},
      remap: async () => {
        throw new Error('These dead letters are events, not source payloads');
      },
      kept: () => {},
    },
  );
}

describe('redrive at SendMessageBatch’s size limit', () => {
  it('moves letters whose bodies and attributes together pass 1 MiB, in calls SQS takes', async () => {
    const deadLetterQueueUrl = await fifoQueue();
    const eventsQueueUrl = await fifoQueue();
    // Six bodies of about 170 KB fit one call (1,020,000 bytes); with each one's 10 KB attribute
    // they do not (1,080,000): the attributes count too.
    const origin = { DataType: 'String', StringValue: 'o'.repeat(10_000) };
    const letters = Array.from({ length: 6 }, (_, i) => ({
      eventId: `big${i}`,
      padding: 170_000,
      attributes: { origin },
    }));
    await write(deadLetterQueueUrl, letters);

    const result = await redrive({ deadLetterQueueUrl, eventsQueueUrl });

    expect(result).toMatchObject({ matched: 6, moved: 6, left: 0, skipped: 0 });
    const moved = await receiveUntil(local.sqs, eventsQueueUrl, 6, { timeoutMs: 10_000 });
    expect(moved.map((m) => JSON.parse(m.Body ?? '{}').eventId).sort()).toEqual(
      letters.map((l) => l.eventId),
    );
    expect(
      moved.every((m) => m.MessageAttributes?.origin?.StringValue === origin.StringValue),
    ).toBe(true);
    expect(await queueCounts(local.sqs, deadLetterQueueUrl)).toEqual({ visible: 0, inFlight: 0 });
  }, 30_000);
});

describe('the cut-off on SQS’s clock', () => {
  it('redrive: an operator clock five minutes slow still moves every letter there, and one written after it started is left and counted', async () => {
    const deadLetterQueueUrl = await fifoQueue();
    const eventsQueueUrl = await fifoQueue();
    // Written just now, as by a batch function on AWS's clock.
    await write(deadLetterQueueUrl, [
      { eventId: 'a', deadLetteredAt: Date.now() },
      { eventId: 'b', deadLetteredAt: Date.now() },
    ]);
    // Once the redrive has moved its first letters, before it reads on: a letter written after
    // it started, past the second SQS's clock said then.
    const sqs = sqsClient(local.endpoint);
    const send = sqs.send.bind(sqs);
    let late = false;
    sqs.send = (async (command: Parameters<typeof send>[0]) => {
      const answer = await send(command);
      if (command instanceof DeleteMessageBatchCommand && !late) {
        late = true;
        await sleep(1_100);
        await write(deadLetterQueueUrl, [{ eventId: 'late', deadLetteredAt: Date.now() }]);
      }
      return answer;
    }) as typeof sqs.send;

    const result = await redrive({ deadLetterQueueUrl, eventsQueueUrl }, { now: slowClock, sqs });
    sqs.destroy();

    expect(result).toMatchObject({ matched: 3, moved: 2, left: 1, skipped: 1 });
    const moved = await receiveUntil(local.sqs, eventsQueueUrl, 2, { timeoutMs: 10_000 });
    expect(moved.map((m) => JSON.parse(m.Body ?? '{}').eventId).sort()).toEqual(['a', 'b']);
    expect(await queueCounts(local.sqs, deadLetterQueueUrl)).toEqual({ visible: 1, inFlight: 0 });
  }, 30_000);

  it('discard: an operator clock five minutes slow still discards every letter there', async () => {
    const queueUrl = await fifoQueue();
    await write(queueUrl, [
      { eventId: 'a', deadLetteredAt: Date.now() },
      { eventId: 'b', deadLetteredAt: Date.now() },
    ]);

    const result = await discardDeadLetters(
      local.sqs,
      queueUrl,
      { limit: 100 },
      {
        dryRun: false,
        hideSeconds: 30,
        now: slowClock,
        sleep: (ms) => sleep(ms),
        shouldStop: () => false,
        waiting: () => {},
      },
    );

    expect(result).toMatchObject({ matched: 2, discarded: 2, left: 0, skipped: 0 });
    expect(await queueCounts(local.sqs, queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  }, 30_000);
});

describe('dead-letters streams', () => {
  it('counts every letter and by reason, and keeps only the newest --limit, newest first', async () => {
    const queueUrl = await fifoQueue();
    const base = Date.now() - 3_600_000;
    // More than the list ever holds at once for a limit of 3 (2 × 3 + 10): it cuts as it reads.
    await write(
      queueUrl,
      Array.from({ length: 25 }, (_, i) => ({
        eventId: `e${i}`,
        reason: i % 5 === 0 ? 'ambiguous_result' : 'mautic_rejected_item',
        deadLetteredAt: base + i * 1000,
      })),
    );

    const list = await listDeadLetters(
      local.sqs,
      queueUrl,
      { limit: 3 },
      { showData: true, now: Date.now, hideSeconds: 30 },
    );

    expect(list).toMatchObject({
      count: 25,
      byReason: { ambiguous_result: 5, mautic_rejected_item: 20 },
      complete: true,
    });
    expect(list.items.map((item) => item.eventId)).toEqual(['e24', 'e23', 'e22']);
    expect(list.items[0]).toMatchObject({ id: 1, data: { note: '' } });
    expect(await queueCounts(local.sqs, queueUrl)).toEqual({ visible: 25, inFlight: 0 });
  }, 30_000);
});
