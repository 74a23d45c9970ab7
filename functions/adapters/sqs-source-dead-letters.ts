import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { QueueUnavailableError } from '../core/errors.ts';
import type { SourceDeadLetter, SourceDeadLetterQueue } from '../core/queue-ports.ts';
import { ENQUEUE_RETRY_DELAYS_MS } from '../core/retry-policy.ts';
import { awsErrorCode } from './aws-error-code.ts';
import { stringAttribute } from './sqs-attributes.ts';

/**
 * The ingest's dead letters: a source payload it could not map (contract §6), sent to the FIFO
 * dead-letter queue with the attributes every dead letter has (`relay.reason`, `relay.detail`,
 * `relay.eventId`, `relay.firstReceivedAt`, as the batch function writes them and the
 * `dead-letters` commands read them; no `relay.status`, no call was made) and `relay.source`.
 * Each letter is a message group of its own: it belongs to no record yet, and a group per source
 * would show the commands one letter of it at a time. Its deduplication id is its id, so a send
 * retried here, or a provider's retry of the same webhook within SQS's five minutes, is kept once.
 * A send that keeps failing throws `QueueUnavailableError`: the sender retries the whole request.
 */
export class SqsSourceDeadLetters implements SourceDeadLetterQueue {
  readonly #client: SQSClient;
  readonly #queueUrl: string;

  constructor(client: SQSClient, deadLetterQueueUrl: string) {
    this.#client = client;
    this.#queueUrl = deadLetterQueueUrl;
  }

  async deadLetter(letter: SourceDeadLetter): Promise<void> {
    const hash = createHash('sha256').update(letter.id).digest();
    const command = new SendMessageCommand({
      QueueUrl: this.#queueUrl,
      MessageBody: letter.body,
      MessageAttributes: attributesOf(letter),
      MessageGroupId: hash.toString('base64url'),
      MessageDeduplicationId: hash.toString('hex'),
    });
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#client.send(command);
        return;
      } catch (error) {
        const wait = ENQUEUE_RETRY_DELAYS_MS[attempt];
        if (wait === undefined) {
          throw new QueueUnavailableError('The dead letter could not be queued', {
            error: error instanceof Error ? error.name : typeof error,
            code: awsErrorCode(error),
          });
        }
        await sleep(wait);
      }
    }
  }
}

/**
 * The letter's attributes, each through `stringAttribute`: the id and the detail may quote the
 * payload (its idempotency key, a jsonata error), and one character SQS refuses would refuse
 * the letter, so the sender would retry for days.
 */
function attributesOf(letter: SourceDeadLetter): Record<string, MessageAttributeValue> {
  return {
    'relay.reason': stringAttribute(letter.reason),
    'relay.detail': stringAttribute(letter.detail),
    'relay.eventId': stringAttribute(letter.id),
    'relay.firstReceivedAt': stringAttribute(letter.receivedAt),
    'relay.source': stringAttribute(letter.source),
  };
}
