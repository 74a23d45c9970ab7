import {
  DeleteMessageBatchCommand,
  type Message,
  type MessageAttributeValue,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { groupsOf } from '../../functions/adapters/sqs-batches.ts';
import { isFifoQueue, type Scanned } from './dead-letter-queue.ts';

/** The queues a redrive moves letters between. */
export interface RedriveQueues {
  deadLetterQueueUrl: string;
  eventsQueueUrl: string;
}

/**
 * Sends to the events queue, then deletes from the dead-letter queue what was sent. To a FIFO
 * events queue each letter goes back in its record's message group, after the letters before it
 * (they come in the group's order and are sent in it); a letter without a group (one from a
 * standard queue: before the relay's queues were FIFO) gets a group of its own. Its
 * deduplication id is the letter's message id: each dead letter is a copy of its own, so a
 * redrive is never taken for a duplicate of the event's earlier trips, while a re-run that sends
 * the same letter again within SQS's 5-minute window is.
 */
export async function move(
  sqs: SQSClient,
  urls: RedriveQueues,
  letters: Scanned[],
  stopped: Set<string>,
): Promise<string[]> {
  const moved: string[] = [];
  let pending = letters;
  // One letter of a record per call, in order, and none after one that did not move: an entry
  // sent again cannot fall behind a later letter of its record that went through.
  while (pending.length > 0) {
    const now: Scanned[] = [];
    const later: Scanned[] = [];
    const taken = new Set<string>();
    for (const letter of pending) {
      const group = groupOf(letter.message);
      if (stopped.has(group)) continue;
      if (taken.has(group)) later.push(letter);
      else {
        taken.add(group);
        now.push(letter);
      }
    }
    const done = new Set(await sendAndDelete(sqs, urls, now));
    for (const letter of now) {
      if (done.has(letter.message.MessageId ?? '')) moved.push(letter.message.MessageId ?? '');
      else stopped.add(groupOf(letter.message));
    }
    pending = later;
  }
  return moved;
}

/** A letter's record (message group); one of its own when it has none (a standard queue's). */
function groupOf(message: Message): string {
  return message.Attributes?.MessageGroupId ?? message.MessageId ?? '';
}

/**
 * Sends letters of different records (at most 10) and deletes those sent, in calls within
 * SendMessageBatch's limits; resolves the message ids moved.
 */
async function sendAndDelete(
  sqs: SQSClient,
  urls: RedriveQueues,
  letters: Scanned[],
): Promise<string[]> {
  const fifo = isFifoQueue(urls.eventsQueueUrl);
  const entries = letters.map(({ message, body }, i) => ({
    Id: String(i),
    MessageBody: body,
    MessageAttributes: originalAttributes(message),
    ...(fifo ? fifoIds(message) : {}),
  }));
  const moved: string[] = [];
  // One letter is at most SQS's largest message, so it always fits a call of its own.
  const calls = groupsOf(entries, (entry) =>
    messageSize(entry.MessageBody, entry.MessageAttributes),
  );
  for (const call of calls) moved.push(...(await sendGroup(sqs, urls, letters, call)));
  return moved;
}

/**
 * A message's size as SQS counts it against its limits: the body's bytes, and each message
 * attribute's name, data type and value (UTF-8 bytes of text, raw bytes of binary).
 */
function messageSize(body: string, attributes: Record<string, MessageAttributeValue>): number {
  let size = Buffer.byteLength(body, 'utf8');
  for (const [name, { DataType, StringValue, BinaryValue }] of Object.entries(attributes)) {
    size += Buffer.byteLength(name, 'utf8') + Buffer.byteLength(DataType ?? '', 'utf8');
    if (StringValue !== undefined) size += Buffer.byteLength(StringValue, 'utf8');
    if (BinaryValue !== undefined) size += BinaryValue.byteLength;
  }
  return size;
}

/** One SendMessageBatch of `group` (entries whose Id is the letter's index), then its delete. */
async function sendGroup(
  sqs: SQSClient,
  urls: RedriveQueues,
  letters: Scanned[],
  group: SendMessageBatchRequestEntry[],
): Promise<string[]> {
  const sent = await sqs.send(
    new SendMessageBatchCommand({ QueueUrl: urls.eventsQueueUrl, Entries: group }),
  );
  const sentIndexes = (sent.Successful ?? []).map((entry) => Number(entry.Id));
  if (sentIndexes.length === 0) return [];
  const deleted = await sqs.send(
    new DeleteMessageBatchCommand({
      QueueUrl: urls.deadLetterQueueUrl,
      Entries: sentIndexes.map((i) => ({
        Id: String(i),
        ReceiptHandle: letters[i]?.message.ReceiptHandle ?? '',
      })),
    }),
  );
  // A message sent but not deleted is still a dead letter: it counts as not moved (and a
  // re-run sends it again).
  return (deleted.Successful ?? []).flatMap((entry) => {
    const messageId = letters[Number(entry.Id)]?.message.MessageId;
    return messageId ? [messageId] : [];
  });
}

function fifoIds(message: Message): { MessageGroupId: string; MessageDeduplicationId: string } {
  return { MessageGroupId: groupOf(message), MessageDeduplicationId: message.MessageId ?? '' };
}

/** The attributes the event had on the events queue: the relay's own are dropped. */
function originalAttributes(message: Message): Record<string, MessageAttributeValue> {
  return Object.fromEntries(
    Object.entries(message.MessageAttributes ?? {}).filter(([name]) => !name.startsWith('relay.')),
  );
}
