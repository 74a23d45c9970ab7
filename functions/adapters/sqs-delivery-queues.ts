import { setTimeout as sleep } from 'node:timers/promises';
import {
  ChangeMessageVisibilityBatchCommand,
  type MessageAttributeValue,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { DeadLetter, DeliveryQueues, QueuedMessage } from '../core/ports.ts';
import { groupsOf, notListed } from './sqs-batches.ts';

/** SQS allows 10 message attributes; these are the relay's own on a dead letter. */
const RELAY_ATTRIBUTES = 7;
const MAX_ATTRIBUTES = 10;
const MAX_DETAIL_CHARS = 1024;
const ATTRIBUTE_ALLOWANCE_BYTES = 4 * 1024;

/**
 * The batch function's own writes to SQS: dead letters (the original body and attributes plus
 * why) and visibility delays of the events queue, each in batches of 10, failed entries retried
 * once.
 */
export class SqsDeliveryQueues implements DeliveryQueues {
  readonly #client: SQSClient;
  readonly #eventsQueueUrl: string;
  readonly #deadLetterQueueUrl: string;

  constructor(client: SQSClient, urls: { eventsQueueUrl: string; deadLetterQueueUrl: string }) {
    this.#client = client;
    this.#eventsQueueUrl = urls.eventsQueueUrl;
    this.#deadLetterQueueUrl = urls.deadLetterQueueUrl;
  }

  deadLetter(letters: ReadonlyArray<DeadLetter>): Promise<string[]> {
    return this.#inBatches(
      letters,
      (letter) => letter.message.messageId,
      // The body plus room for the attributes: SQS caps a batch at 1 MiB summed.
      (letter) => Buffer.byteLength(letter.message.body) + ATTRIBUTE_ALLOWANCE_BYTES,
      async (entries) => {
        const answer = await this.#client.send(
          new SendMessageBatchCommand({
            QueueUrl: this.#deadLetterQueueUrl,
            Entries: entries.map(([id, letter]) => ({
              Id: id,
              MessageBody: letter.message.body,
              MessageAttributes: deadLetterAttributes(letter),
            })),
          }),
        );
        return notListed(entries, answer.Successful);
      },
    );
  }

  delay(messages: ReadonlyArray<QueuedMessage>, seconds: number): Promise<string[]> {
    return this.#inBatches(
      messages,
      (message) => message.messageId,
      () => 0,
      async (entries) => {
        const answer = await this.#client.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: this.#eventsQueueUrl,
            Entries: entries.map(([id, message]) => ({
              Id: id,
              ReceiptHandle: message.receiptHandle,
              VisibilityTimeout: seconds,
            })),
          }),
        );
        return notListed(entries, answer.Successful);
      },
    );
  }

  /**
   * Runs `send` over groups of at most 10 entries and 1 MiB, with ids local to the group;
   * entries that fail are tried once more. Resolves the message ids that still failed (a whole
   * group whose call threw counts as failed).
   */
  async #inBatches<T>(
    items: ReadonlyArray<T>,
    messageIdOf: (item: T) => string,
    sizeOf: (item: T) => number,
    send: (entries: Array<[string, T]>) => Promise<string[]>,
  ): Promise<string[]> {
    const failed: string[] = [];
    for (const group of groupsOf(items, sizeOf)) {
      let entries = group.map((item, index): [string, T] => [String(index), item]);
      for (let attempt = 1; attempt <= 2 && entries.length > 0; attempt++) {
        let failedIds: string[];
        try {
          failedIds = await send(entries);
        } catch {
          failedIds = entries.map(([id]) => id);
        }
        entries = entries.filter(([id]) => failedIds.includes(id));
        if (entries.length > 0 && attempt === 1) await sleep(100);
      }
      failed.push(...entries.map(([, item]) => messageIdOf(item)));
    }
    return failed;
  }
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
  const text = (value: string): MessageAttributeValue => ({
    DataType: 'String',
    StringValue: value || '-',
  });
  attributes['relay.reason'] = text(letter.reason);
  attributes['relay.detail'] = text(letter.detail.slice(0, MAX_DETAIL_CHARS));
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
