import { setTimeout as sleep } from 'node:timers/promises';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { QueueUnavailableError } from '../core/errors.ts';
import type { EventQueue, OutgoingMessage } from '../core/queue-ports.ts';
import { ENQUEUE_RETRY_DELAYS_MS } from '../core/retry-policy.ts';
import { awsErrorCode } from './aws-error-code.ts';
import { groupsOf, notListed } from './sqs-batches.ts';

/** SendMessageBatch calls one request keeps in flight at once. */
const BATCHES_IN_FLIGHT = 8;

/**
 * Queues one SQS message per event with SendMessageBatch, in batches within SQS's limits, on a
 * FIFO queue whose message groups are records. SendMessageBatch answers 200 even when entries
 * failed, so `Failed[]` is read and those entries (or a whole batch whose call threw) are retried
 * with backoff; if any still fail the whole request fails with `QueueUnavailableError`, for the
 * sender to retry. Batches go out concurrently (bounded), so some may be queued when the request
 * fails: `queued` is told of every message SQS took, for the ingest to keep with the request's
 * claim, so that the sender's retry of the whole request queues only the rest.
 *
 * A record's events keep their order (contract §2): a batch holds at most one event of a record,
 * so an entry retried alone cannot fall behind a later event of its record that succeeded; and a
 * batch waits for every earlier batch with an event of one of its records, and is not sent at all
 * when one of those failed.
 */
export class SqsEventQueue implements EventQueue {
  readonly #client: SQSClient;
  readonly #queueUrl: string;

  constructor(client: SQSClient, queueUrl: string) {
    this.#client = client;
    this.#queueUrl = queueUrl;
  }

  async enqueue(
    messages: ReadonlyArray<OutgoingMessage>,
    queued: (message: OutgoingMessage) => void = () => {},
  ): Promise<void> {
    const batches = groupsOf(
      messages,
      (message) => Buffer.byteLength(message.body),
      (message) => message.groupId,
    );
    const after = earlierBatchesOfTheirRecords(batches);
    const tries: Tries = { total: messages.length, last: {}, queued };
    /** Per batch: true once queued, false when it was not sent because an earlier one failed. */
    const sent: Array<Promise<boolean>> = [];
    // BATCHES_IN_FLIGHT at a time: one after another, a 500-event request waited 50 round trips.
    // A batch that cannot be queued fails the request only once every batch in flight settled,
    // so no call is left running after the answer.
    let next = 0;
    let failure: unknown;
    const worker = async () => {
      while (failure === undefined && next < batches.length) {
        const index = next++;
        sent[index] = (async () => {
          const earlier = await Promise.allSettled((after[index] ?? []).map((i) => sent[i]));
          if (earlier.some((result) => result.status === 'rejected' || !result.value)) return false;
          await this.#enqueueGroup(batches[index] as OutgoingMessage[], tries);
          return true;
        })();
        try {
          await sent[index];
        } catch (error) {
          failure ??= error;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(BATCHES_IN_FLIGHT, batches.length) }, worker));
    if (failure !== undefined) throw failure;
  }

  async #enqueueGroup(group: ReadonlyArray<OutgoingMessage>, tries: Tries): Promise<void> {
    let pending = group.map((message, index): [string, OutgoingMessage] => [
      String(index),
      message,
    ]);
    for (let attempt = 0; pending.length > 0; attempt++) {
      const failed = await this.#send(pending, tries);
      pending = pending.filter(([id]) => failed.has(id));
      if (pending.length === 0) break;
      const wait = ENQUEUE_RETRY_DELAYS_MS[attempt];
      if (wait === undefined) {
        throw new QueueUnavailableError(
          `${pending.length} of ${tries.total} events could not be queued`,
          tries.last,
        );
      }
      await sleep(wait);
    }
  }

  /**
   * Sends the entries; tells `queued` of each SQS took, resolves the ids of the others and notes
   * in `last` what SQS last said.
   */
  async #send(entries: Array<[string, OutgoingMessage]>, tries: Tries): Promise<Set<string>> {
    const { last } = tries;
    try {
      const answer = await this.#client.send(
        new SendMessageBatchCommand({
          QueueUrl: this.#queueUrl,
          Entries: entries.map(([id, message]) => ({
            Id: id,
            MessageBody: message.body,
            MessageGroupId: message.groupId,
            MessageDeduplicationId: message.deduplicationId,
          })),
        }),
      );
      const failed = new Set(notListed(entries, answer.Successful));
      for (const [id, message] of entries) if (!failed.has(id)) tries.queued(message);
      // SQS blames the message itself: sending it again cannot help.
      const refused = answer.Failed?.find((failure) => failure.SenderFault);
      if (refused) {
        throw new QueueUnavailableError(
          `SQS refused a message (${refused.Code ?? 'unknown code'})`,
          { error: 'SenderFault', code: refused.Code },
        );
      }
      const first = answer.Failed?.[0];
      if (first) {
        last.error = 'BatchEntryFailed';
        last.code = first.Code;
      }
      return failed;
    } catch (error) {
      if (error instanceof QueueUnavailableError) throw error;
      last.error = error instanceof Error ? error.name : typeof error;
      last.code = awsErrorCode(error);
      return new Set(entries.map(([id]) => id));
    }
  }
}

/** What SQS last said about a failed send: an error name and a code, never a message body. */
interface FailureReason {
  error?: string | undefined;
  code?: string | undefined;
}

/** What the batches of one `enqueue` share: its size, what SQS last said, whom to tell. */
interface Tries {
  total: number;
  last: FailureReason;
  queued: (message: OutgoingMessage) => void;
}

/** For each batch, the earlier batches that hold an event of one of its records. */
function earlierBatchesOfTheirRecords(batches: ReadonlyArray<ReadonlyArray<OutgoingMessage>>) {
  const lastBatchOf = new Map<string, number>();
  return batches.map((batch, index) => {
    const earlier = new Set<number>();
    for (const { groupId } of batch) {
      const last = lastBatchOf.get(groupId);
      if (last !== undefined) earlier.add(last);
      lastBatchOf.set(groupId, index);
    }
    return [...earlier];
  });
}
