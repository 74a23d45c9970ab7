/**
 * The dead-letter commands against FIFO queues in fauxqs, as the stack makes them: a redrive
 * sends every dead letter back in its record's message group, in the record's order; what a
 * FIFO queue holds back behind a record's earlier dead letters is said to be unread, and a read
 * leaves the queue in the order it found it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SendMessageBatchCommandOutput,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listDeadLetters } from '../../infra/cli/dead-letters.ts';
import { redriveDeadLetters } from '../../infra/cli/redrive-letters.ts';
import {
  type LocalSqs,
  queueCounts,
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

/** A queue as infra/aws/storage.ts makes it: FIFO, or standard as before the upgrade. */
async function createQueue(kind: 'fifo' | 'standard'): Promise<string> {
  const name = uniqueQueueName(kind);
  const { QueueUrl } = await local.sqs.send(
    new CreateQueueCommand(
      kind === 'fifo'
        ? {
            QueueName: `${name}.fifo`,
            Attributes: {
              FifoQueue: 'true',
              ContentBasedDeduplication: 'false',
              DeduplicationScope: 'messageGroup',
              FifoThroughputLimit: 'perMessageGroupId',
            },
          }
        : { QueueName: name },
    ),
  );
  if (!QueueUrl) throw new Error('CreateQueue answered no URL');
  return QueueUrl;
}

interface Letter {
  eventId: string;
  /** The record's message group; none in a standard queue. */
  group?: string;
  reason?: string;
}

/** Dead letters as the batch function writes them, in this order; resolves their message ids. */
async function deadLetters(queueUrl: string, letters: Letter[]): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; start < letters.length; start += 10) {
    const group = letters.slice(start, start + 10);
    const { Successful = [], Failed = [] } = await local.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: group.map(({ eventId, group, reason = 'mautic_rejected_item' }, i) => ({
          Id: String(i),
          MessageBody: JSON.stringify({ eventId, entity: 'contacts', action: 'edit', id: i }),
          MessageAttributes: {
            'relay.reason': { DataType: 'String', StringValue: reason },
            'relay.deadLetteredAt': {
              DataType: 'String',
              StringValue: new Date(Date.now() - 60_000).toISOString(),
            },
          },
          ...(group === undefined
            ? {}
            : { MessageGroupId: group, MessageDeduplicationId: `dead-${eventId}` }),
        })),
      }),
    );
    expect(Failed).toEqual([]);
    ids.push(...group.map((_, i) => Successful.find((e) => e.Id === String(i))?.MessageId ?? ''));
  }
  return ids;
}

/** Receives and deletes everything, as a consumer would: a FIFO queue's groups in their order. */
async function drain(queueUrl: string, count: number): Promise<Message[]> {
  const taken: Message[] = [];
  const deadline = Date.now() + 5_000;
  while (taken.length < count && Date.now() < deadline) {
    const { Messages = [] } = await local.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    for (const message of Messages) {
      taken.push(message);
      await local.sqs.send(
        new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }),
      );
    }
    if (Messages.length === 0) await sleep(20);
  }
  return taken;
}

const eventIdOf = (message: Message) =>
  (JSON.parse(message.Body ?? '{}') as { eventId: string }).eventId;

/** Each group's event ids, in the order they came. */
function byGroup(messages: Message[]): Record<string, string[]> {
  const groups: Record<string, string[]> = {};
  for (const message of messages) {
    const group = message.Attributes?.MessageGroupId ?? '(none)';
    groups[group] = [...(groups[group] ?? []), eventIdOf(message)];
  }
  return groups;
}

function redrive(
  urls: { deadLetterQueueUrl: string; eventsQueueUrl: string },
  reason?: string,
  sqs: SQSClient = local.sqs,
) {
  return redriveDeadLetters(
    sqs,
    urls,
    { limit: 100, reason },
    {
      rate: 1000,
      dryRun: false,
      hideSeconds: 30,
      now: Date.now,
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

describe('dead letters in FIFO queues', () => {
  it('redrives each dead letter into its record’s group, in the record’s order, deduplicated by its own message id', async () => {
    const deadLetterQueueUrl = await createQueue('fifo');
    const eventsQueueUrl = await createQueue('fifo');
    const letters: Letter[] = [
      { eventId: 'a1', group: 'A' },
      { eventId: 'b1', group: 'B' },
      { eventId: 'a2', group: 'A' },
      { eventId: 'b2', group: 'B' },
      { eventId: 'a3', group: 'A' },
      { eventId: 'c1', group: 'C' },
    ];
    const messageIds = await deadLetters(deadLetterQueueUrl, letters);

    const result = await redrive({ deadLetterQueueUrl, eventsQueueUrl });

    expect(result).toEqual({
      matched: 6,
      moved: 6,
      left: 0,
      complete: true,
      nothingQueued: 0,
      skipped: 0,
    });
    const events = await drain(eventsQueueUrl, 6);
    expect(byGroup(events)).toEqual({ A: ['a1', 'a2', 'a3'], B: ['b1', 'b2'], C: ['c1'] });
    const dedup = Object.fromEntries(
      events.map((message) => [eventIdOf(message), message.Attributes?.MessageDeduplicationId]),
    );
    expect(dedup).toEqual(
      Object.fromEntries(letters.map((letter, i) => [letter.eventId, messageIds[i]])),
    );
    expect(await queueCounts(local.sqs, deadLetterQueueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('gives a dead letter from a standard queue (before the upgrade) a group of its own', async () => {
    const deadLetterQueueUrl = await createQueue('standard');
    const eventsQueueUrl = await createQueue('fifo');
    const messageIds = await deadLetters(deadLetterQueueUrl, [
      { eventId: 'old1' },
      { eventId: 'old2' },
    ]);

    expect(await redrive({ deadLetterQueueUrl, eventsQueueUrl })).toMatchObject({
      moved: 2,
      complete: true,
    });

    const events = await drain(eventsQueueUrl, 2);
    expect(
      events
        .map((message) => [
          eventIdOf(message),
          message.Attributes?.MessageGroupId,
          message.Attributes?.MessageDeduplicationId,
        ])
        .sort(),
    ).toEqual([
      ['old1', messageIds[0], messageIds[0]],
      ['old2', messageIds[1], messageIds[1]],
    ]);
  });

  it('moves a record’s dead letters in its order past one it leaves, reaching the rest in later rounds', async () => {
    const deadLetterQueueUrl = await createQueue('fifo');
    const eventsQueueUrl = await createQueue('fifo');
    // More of record A than one receive returns: its later ones wait while any of A is hidden.
    const later = Array.from({ length: 11 }, (_, i) => `a${i + 2}`);
    await deadLetters(deadLetterQueueUrl, [
      { eventId: 'a1', group: 'A', reason: 'ambiguous_result' },
      ...later.map((eventId) => ({ eventId, group: 'A' })),
      { eventId: 'b1', group: 'B' },
    ]);

    const result = await redrive({ deadLetterQueueUrl, eventsQueueUrl }, 'mautic_rejected_item');

    expect(result).toEqual({
      matched: 12,
      moved: 12,
      left: 0,
      complete: true,
      nothingQueued: 0,
      skipped: 0,
    });
    expect(byGroup(await drain(eventsQueueUrl, 12))).toEqual({ A: later, B: ['b1'] });
    expect(byGroup(await drain(deadLetterQueueUrl, 1))).toEqual({ A: ['a1'] });
  });

  it('says it could not read a record’s dead letters that wait behind more than a receive of ones it leaves', async () => {
    const deadLetterQueueUrl = await createQueue('fifo');
    const eventsQueueUrl = await createQueue('fifo');
    const leftOfA = Array.from({ length: 11 }, (_, i) => `a${i + 1}`);
    await deadLetters(deadLetterQueueUrl, [
      ...leftOfA.map((eventId) => ({ eventId, group: 'A', reason: 'ambiguous_result' })),
      { eventId: 'a12', group: 'A' },
      { eventId: 'b1', group: 'B' },
    ]);

    const result = await redrive({ deadLetterQueueUrl, eventsQueueUrl }, 'mautic_rejected_item');

    expect(result).toEqual({
      matched: 1,
      moved: 1,
      left: 0,
      complete: false,
      nothingQueued: 0,
      skipped: 0,
    });
    expect(byGroup(await drain(eventsQueueUrl, 1))).toEqual({ B: ['b1'] });
    // What it read is visible again, in the order it was.
    expect(byGroup(await drain(deadLetterQueueUrl, 12))).toEqual({ A: [...leftOfA, 'a12'] });
  });

  it.each([
    ['once', 1, { matched: 12, moved: 12, left: 0 }],
    ['every time', Number.POSITIVE_INFINITY, { matched: 12, moved: 11, left: 1 }],
  ])(
    'tries a letter SQS did not take again in a later round, and counts it left when SQS refuses it %s',
    async (_, refusals, counts) => {
      const deadLetterQueueUrl = await createQueue('fifo');
      const eventsQueueUrl = await createQueue('fifo');
      // Record A's later letters wait behind one the filter leaves: a first round cannot read them.
      await deadLetters(deadLetterQueueUrl, [
        { eventId: 'b1', group: 'B' },
        { eventId: 'a1', group: 'A', reason: 'ambiguous_result' },
        ...Array.from({ length: 11 }, (_, i) => ({ eventId: `a${i + 2}`, group: 'A' })),
      ]);
      // SQS answers B's entry Failed (not sent), `refusals` times.
      const sqs = sqsClient(local.endpoint);
      const send = sqs.send.bind(sqs);
      let refused = 0;
      sqs.send = (async (command: Parameters<typeof send>[0]) => {
        if (!(command instanceof SendMessageBatchCommand) || refused >= refusals)
          return send(command);
        const entries = command.input.Entries ?? [];
        const isB = (entry: { MessageBody?: string | undefined }) =>
          entry.MessageBody?.includes('"b1"') === true;
        if (!entries.some(isB)) return send(command);
        refused++;
        const rest = entries.filter((entry) => !isB(entry));
        const answer = (
          rest.length === 0
            ? { Successful: [] }
            : await send(new SendMessageBatchCommand({ ...command.input, Entries: rest }))
        ) as SendMessageBatchCommandOutput;
        const failed = entries.filter(isB).map((entry) => ({
          Id: entry.Id,
          Code: 'InternalError',
          SenderFault: false,
        }));
        return { ...answer, Failed: [...(answer.Failed ?? []), ...failed] };
      }) as typeof sqs.send;

      const result = await redrive(
        { deadLetterQueueUrl, eventsQueueUrl },
        'mautic_rejected_item',
        sqs,
      );
      sqs.destroy();

      expect(result).toMatchObject({ ...counts, complete: true });
      // What is left is there: a1, which the filter leaves, and b1 while SQS refuses it.
      expect(await queueCounts(local.sqs, deadLetterQueueUrl)).toEqual({
        visible: 1 + counts.left,
        inFlight: 0,
      });
    },
  );

  it('lists what it can reach, says the list is partial, and leaves the queue in its order', async () => {
    const deadLetterQueueUrl = await createQueue('fifo');
    const ofA = Array.from({ length: 12 }, (_, i) => `a${i + 1}`);
    await deadLetters(deadLetterQueueUrl, [
      ...ofA.map((eventId) => ({ eventId, group: 'A' })),
      { eventId: 'b1', group: 'B' },
    ]);

    const list = await listDeadLetters(
      local.sqs,
      deadLetterQueueUrl,
      { limit: 100 },
      { showData: false, now: Date.now, hideSeconds: 30 },
    );

    expect(list.complete).toBe(false);
    expect(list.count).toBeLessThan(13);
    expect(list.items.map((item) => item.eventId)).toContain('a1');
    expect(byGroup(await drain(deadLetterQueueUrl, 13))).toEqual({ A: ofA, B: ['b1'] });
  });

  it('calls a listing of a FIFO queue whose every letter it read complete', async () => {
    const deadLetterQueueUrl = await createQueue('fifo');
    await deadLetters(deadLetterQueueUrl, [
      { eventId: 'a1', group: 'A' },
      { eventId: 'b1', group: 'B' },
    ]);

    const list = await listDeadLetters(
      local.sqs,
      deadLetterQueueUrl,
      { limit: 100 },
      { showData: false, now: Date.now, hideSeconds: 30 },
    );

    expect(list).toMatchObject({ count: 2, complete: true });
  });
});
