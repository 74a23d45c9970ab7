import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  type Message,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Logger } from '../core/ports.ts';
import type { DeadLetter, DeliveryQueues, QueuedMessage } from '../core/queue-ports.ts';
import { awsErrorCode } from './aws-error-code.ts';
import { stringAttribute } from './sqs-attributes.ts';
import { groupsOf, notListed } from './sqs-batches.ts';

/** SQS allows 10 message attributes; these are the relay's own on a dead letter. */
const RELAY_ATTRIBUTES = 7;
const MAX_ATTRIBUTES = 10;
const ATTRIBUTE_ALLOWANCE_BYTES = 4 * 1024;

/** The longest one settling call (a delete, a delay, dead letters) may take. */
const SETTLE_CALL_TIMEOUT_MS = 2_000;

/** ReceiveMessage calls the batch function keeps in flight while it gathers its batch. */
const RECEIVES_IN_FLIGHT = 4;
/**
 * Every receive is a long poll of this long, never a short one: SQS answers a short poll from a
 * sample of its servers, so it may come back empty while messages wait (a false empty), and a
 * gathering that believed it would close its batch far short. A long poll asks every server and
 * answers as soon as a message is there; empty, it says nothing arrived for this long.
 */
const LONG_POLL_SECONDS = 1;
/** An empty answer this much sooner than its wait did not wait out its poll. */
const EARLY_ANSWER_MS = 100;

/**
 * The batch function's own calls to SQS: receiving the rest of its batch from the FIFO events
 * queue (the event source hands it at most 10), deleting what it received itself once settled,
 * dead letters (the original body and attributes plus why, in the record's message group) and
 * visibility delays, each in batches of 10, failed entries retried once.
 */
export class SqsDeliveryQueues implements DeliveryQueues {
  readonly #client: SQSClient;
  readonly #eventsQueueUrl: string;
  readonly #deadLetterQueueUrl: string;
  readonly #logger: Logger | undefined;

  constructor(
    client: SQSClient,
    urls: { eventsQueueUrl: string; deadLetterQueueUrl: string },
    logger?: Logger,
  ) {
    this.#client = client;
    this.#eventsQueueUrl = urls.eventsQueueUrl;
    this.#deadLetterQueueUrl = urls.deadLetterQueueUrl;
    this.#logger = logger;
  }

  deadLetter(letters: ReadonlyArray<DeadLetter>, until?: number): Promise<string[]> {
    return this.#inBatches(
      letters,
      (letter) => letter.message.messageId,
      // The body plus room for the attributes: SQS caps a batch at 1 MiB summed.
      (letter) => Buffer.byteLength(letter.message.body) + ATTRIBUTE_ALLOWANCE_BYTES,
      async (entries, abortSignal) => {
        const answer = await this.#client.send(
          new SendMessageBatchCommand({
            QueueUrl: this.#deadLetterQueueUrl,
            Entries: entries.map(([id, letter]) => ({
              Id: id,
              MessageBody: letter.message.body,
              MessageAttributes: deadLetterAttributes(letter),
              // The record's group keeps a redrive in order; the message id is unique per copy,
              // so the dead-letter queue's deduplication never swallows a letter.
              MessageGroupId: groupOf(letter),
              MessageDeduplicationId: letter.message.messageId,
            })),
          }),
          { abortSignal },
        );
        return notListed(entries, answer.Successful);
      },
      // A record's letters go out in turn (its first letters all at once, then its second…),
      // and one per call: a failed entry sent again cannot fall behind a later one that went.
      { keyOf: groupOf, until },
    );
  }

  delay(
    delays: ReadonlyArray<{ message: QueuedMessage; seconds: number }>,
    until?: number,
  ): Promise<string[]> {
    return this.#inBatches(
      delays,
      ({ message }) => message.messageId,
      () => 0,
      async (entries, abortSignal) => {
        const answer = await this.#client.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: this.#eventsQueueUrl,
            // Each entry its own delay: one call carries ten messages, whatever their delays.
            Entries: entries.map(([id, { message, seconds }]) => ({
              Id: id,
              ReceiptHandle: message.receiptHandle,
              VisibilityTimeout: seconds,
            })),
          }),
          { abortSignal },
        );
        return notListed(entries, answer.Successful);
      },
      { until },
    );
  }

  async receive(max: number, until: number, holdSeconds?: number, pollSeconds = LONG_POLL_SECONDS) {
    const received: QueuedMessage[] = [];
    let wanted = max;
    let done = false;
    /** When a receive last brought messages, whichever of them it was (a monotonic clock). */
    let lastArrival = Number.NEGATIVE_INFINITY;
    // Several receives at once: one after another, 19 of them took longer than a Mautic call.
    const receiver = async () => {
      while (!done && wanted > 0 && Date.now() < until) {
        const count = Math.min(10, wanted);
        wanted -= count;
        const asked = performance.now();
        const messages = await this.#receiveOnce(count, pollSeconds, holdSeconds);
        if (messages === undefined) done = true;
        received.push(...(messages ?? []));
        wanted += count - (messages?.length ?? count);
        if (messages !== undefined && messages.length > 0) lastArrival = performance.now();
        // A whole long poll without a message, while no other receive brought one either:
        // nothing more is arriving, the batch goes as it is. Messages arriving a few at a time
        // wake one waiting poll each, so among several polls (this batch's and other
        // invocations') one often waits its whole second empty in the middle of a burst. An
        // empty answer before its time (an emulator waking every waiting poll for one message)
        // says nothing of the kind either: poll again.
        const waited = performance.now() - asked >= pollSeconds * 1000 - EARLY_ANSWER_MS;
        // At or before `asked`: this receive's own last answer, which it asked again after.
        if (messages?.length === 0 && waited && lastArrival <= asked) done = true;
      }
    };
    await Promise.all(Array.from({ length: RECEIVES_IN_FLIGHT }, receiver));
    return received;
  }

  /** One ReceiveMessage; undefined when the call failed. */
  async #receiveOnce(
    count: number,
    waitSeconds: number,
    holdSeconds: number | undefined,
  ): Promise<QueuedMessage[] | undefined> {
    try {
      const answer = await this.#client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.#eventsQueueUrl,
          MaxNumberOfMessages: count,
          WaitTimeSeconds: waitSeconds,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
          // Hidden as long as the invocation may hold them, not the queue's 6 × timeout: after a
          // crash their records wait no longer than that.
          ...(holdSeconds === undefined ? {} : { VisibilityTimeout: holdSeconds }),
          // An SDK retry after a lost answer gets the same messages back, rather than leaving
          // them hidden, and their records blocked, until their visibility runs out.
          ReceiveRequestAttemptId: randomUUID(),
        }),
      );
      return (answer.Messages ?? []).map(toQueuedMessage);
    } catch (error) {
      // The messages in hand are delivered; the queue keeps the rest. Said, because receives
      // that keep failing shrink every batch to the event source's 10.
      this.#logger?.warn('Could not receive more events; delivering the batch in hand', {
        event: 'receive_failed',
        error: error instanceof Error ? error.name : typeof error,
        code: awsErrorCode(error),
      });
      return undefined;
    }
  }

  remove(messages: ReadonlyArray<QueuedMessage>, until?: number): Promise<string[]> {
    return this.#inBatches(
      messages,
      (message) => message.messageId,
      () => 0,
      async (entries, abortSignal) => {
        const answer = await this.#client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.#eventsQueueUrl,
            Entries: entries.map(([id, message]) => ({
              Id: id,
              ReceiptHandle: message.receiptHandle,
            })),
          }),
          { abortSignal },
        );
        return notListed(entries, answer.Successful);
      },
      { until },
    );
  }

  /**
   * Runs `send` over groups of at most 10 entries and 1 MiB, with ids local to the group, all
   * groups at once (with `keyOf`, a key's items in turn: its first ones in the first wave, its
   * second ones in the next…); entries that fail are tried once more. Every call has its own
   * timeout, and none starts or lasts past `until`: settling never outlives the invocation.
   * Resolves the message ids that still failed (a call that threw or timed out: all its own).
   */
  async #inBatches<T>(
    items: ReadonlyArray<T>,
    messageIdOf: (item: T) => string,
    sizeOf: (item: T) => number,
    send: (entries: Array<[string, T]>, abortSignal: AbortSignal) => Promise<string[]>,
    how: { keyOf?: (item: T) => string; until?: number | undefined } = {},
  ): Promise<string[]> {
    const until = how.until ?? Number.POSITIVE_INFINITY;
    const sendGroup = async (group: T[]): Promise<string[]> => {
      let entries = group.map((item, index): [string, T] => [String(index), item]);
      for (let attempt = 1; attempt <= 2 && entries.length > 0; attempt++) {
        const leftMs = Math.min(SETTLE_CALL_TIMEOUT_MS, until - Date.now());
        if (leftMs <= 0) break;
        let failedIds: string[];
        try {
          failedIds = await send(entries, AbortSignal.timeout(leftMs));
        } catch {
          failedIds = entries.map(([id]) => id);
        }
        entries = entries.filter(([id]) => failedIds.includes(id));
        // Never a negative pause: the time may be up by now (Node would warn, and wait 1 ms).
        if (entries.length > 0 && attempt === 1)
          await sleep(Math.max(0, Math.min(100, until - Date.now())));
      }
      return entries.map(([, item]) => messageIdOf(item));
    };
    const failed: string[] = [];
    for (const wave of waves(items, how.keyOf)) {
      const groups = groupsOf(wave, sizeOf, how.keyOf);
      failed.push(...(await Promise.all(groups.map(sendGroup))).flat());
    }
    return failed;
  }
}

/** The items in waves: each key's first item in the first, its second in the next, and so on. */
function waves<T>(items: ReadonlyArray<T>, keyOf?: (item: T) => string): T[][] {
  if (keyOf === undefined) return [[...items]];
  const seen = new Map<string, number>();
  const result: T[][] = [];
  for (const item of items) {
    const key = keyOf(item);
    const wave = seen.get(key) ?? 0;
    seen.set(key, wave + 1);
    const inWave = result[wave] ?? [];
    inWave.push(item);
    result[wave] = inWave;
  }
  return result;
}

function deadLetterAttributes(letter: DeadLetter): Record<string, MessageAttributeValue> {
  const attributes: Record<string, MessageAttributeValue> = {};
  // The original attributes first, as many as fit beside the relay's own.
  for (const [name, value] of Object.entries(letter.message.messageAttributes).slice(
    0,
    MAX_ATTRIBUTES - RELAY_ATTRIBUTES,
  )) {
    if (value.stringValue !== undefined)
      attributes[name] = { DataType: value.dataType, StringValue: value.stringValue };
    else if (value.binaryValue !== undefined) {
      attributes[name] = {
        DataType: value.dataType,
        BinaryValue: Buffer.from(value.binaryValue, 'base64'),
      };
    }
  }
  // Every value SQS can take: characters it refuses replaced, cut between code points.
  const text = (value: string) => stringAttribute(value);
  attributes['relay.reason'] = text(letter.reason);
  attributes['relay.detail'] = text(letter.detail);
  if (letter.status !== undefined)
    attributes['relay.status'] = { DataType: 'Number', StringValue: String(letter.status) };
  if (letter.eventId !== undefined) attributes['relay.eventId'] = text(letter.eventId);
  if (letter.entity !== undefined) attributes['relay.entity'] = text(letter.entity);
  if (letter.action !== undefined) attributes['relay.action'] = text(letter.action);
  const firstReceived = Number(letter.message.attributes.ApproximateFirstReceiveTimestamp);
  if (Number.isFinite(firstReceived) && firstReceived > 0) {
    attributes['relay.firstReceivedAt'] = text(new Date(firstReceived).toISOString());
  }
  return attributes;
}

/** A received message in the shape the event source hands over (Lambda's SQSRecord fits). */
function toQueuedMessage(message: Message): QueuedMessage {
  const messageAttributes: QueuedMessage['messageAttributes'] = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      dataType: value.DataType ?? 'String',
      ...(value.StringValue === undefined ? {} : { stringValue: value.StringValue }),
      ...(value.BinaryValue === undefined
        ? {}
        : { binaryValue: Buffer.from(value.BinaryValue).toString('base64') }),
    };
  }
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes: { ...message.Attributes },
    messageAttributes,
  };
}

/** A letter's message group: its record's, or one of its own for a message that had none. */
function groupOf(letter: DeadLetter): string {
  return letter.message.attributes.MessageGroupId ?? letter.message.messageId;
}
