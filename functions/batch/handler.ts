import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { planBatches } from '../core/batch-plan.ts';
import { type DeliveryDeps, type DeliveryOptions, deliverChunks } from '../core/delivery.ts';
import { readMessages, type Settlement, settleBatch } from '../core/outcomes.ts';
import type { DeadLetter, DeliveryQueues } from '../core/ports.ts';
import type { RetryPolicy } from '../core/retry-policy.ts';

/** Everything the batch handler talks to; `compose.ts` builds the real ones. */
export interface BatchHandlerDeps extends DeliveryDeps {
  queues: DeliveryQueues;
  retry: RetryPolicy;
  options: DeliveryOptions & {
    /** Longest visibility delay after a 429 (SQS allows 12 hours). */
    maxDelaySeconds: number;
  };
}

export type BatchHandler = (
  event: SQSEvent,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
) => Promise<SQSBatchResponse>;

/**
 * The SQS-triggered batch function: reads the messages, plans the Mautic calls, delivers them,
 * dead-letters what Mautic refused for good, delays what hit the rate limit, and reports every
 * other failure by message id in `batchItemFailures`. Nothing is acknowledged that was not
 * delivered or dead-lettered.
 *
 * It builds the partial batch response itself rather than with Powertools'
 * `processPartialResponse`, which handles records one by one: here the unit of work is the
 * whole batch (one Mautic call for up to 200 records), and results map back by message id.
 */
export function createBatchHandler(deps: BatchHandlerDeps): BatchHandler {
  return async (event, context) => {
    const { deadline, options, signal } = timing(context.getRemainingTimeInMillis(), deps);
    const read = readMessages(event.Records, deps.retry.maxReceiveCount);
    // Letters that need no delivery go first: should this invocation die during delivery, a
    // message on its last allowed receive is already dead-lettered with its reason, not moved
    // by the queue without one.
    const early = await deadLetter(read.unreadable, deps);
    const outcomes = await deliverChunks(
      planBatches(read.incoming, options.batchSize),
      deadline,
      deps,
      options,
      signal,
    );
    const settled = settleBatch(event.Records, { ...read, unreadable: [] }, outcomes, {
      now: deps.clock.now(),
      maxDelaySeconds: options.maxDelaySeconds,
      policy: deps.retry,
      random: deps.random,
    });
    const notDeadLettered = [...early, ...(await deadLetter(settled.deadLetters, deps))];
    await delay(settled, deps);
    const failures = [...settled.retry.map((record) => record.messageId), ...notDeadLettered];
    const letters = read.unreadable.length + settled.deadLetters.length;
    report(settled, letters - notDeadLettered.length, failures.length, deps);
    return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })) };
  };
}

/** The run's deadline and how close to it calls may go. */
function timing(remainingMs: number, deps: BatchHandlerDeps) {
  const deadline = deps.clock.now() + remainingMs;
  // A short timeout cannot give up the whole margin: keep at most a quarter of it in reserve.
  const options = {
    ...deps.options,
    deadlineMarginMs: Math.min(deps.options.deadlineMarginMs, Math.floor(remainingMs / 4)),
  };
  // Calls in flight are aborted at half the margin, leaving time to dead-letter and answer.
  const signal = AbortSignal.timeout(
    Math.max(1, Math.floor(remainingMs - options.deadlineMarginMs / 2)),
  );
  return { deadline, options, signal };
}

/** Sends the dead letters; answers the message ids that could not be sent (they stay queued). */
async function deadLetter(
  letters: ReadonlyArray<DeadLetter & { message: SQSRecord }>,
  { queues, logger }: BatchHandlerDeps,
): Promise<string[]> {
  if (letters.length === 0) return [];
  const notSent = await queues.deadLetter(letters);
  if (notSent.length > 0) {
    logger.error('Could not reach the dead-letter queue; those events stay on the events queue', {
      event: 'dead_letter_failed',
      count: notSent.length,
    });
  }
  const failed = new Set(notSent);
  for (const letter of letters) {
    if (failed.has(letter.message.messageId)) continue;
    logger.warn('Event dead-lettered', {
      event: 'dead_lettered',
      messageId: letter.message.messageId,
      eventId: letter.eventId,
      reason: letter.reason,
      status: letter.status,
      entity: letter.entity,
      action: letter.action,
    });
  }
  return notSent;
}

/**
 * Hides each retried message for its backoff (or until Mautic's rate-limit window resets), so a
 * failure that is not the event's own spends time, not receives. A delay that cannot be set
 * leaves the queue's own visibility timeout.
 */
async function delay(settled: Settlement<SQSRecord>, { queues, logger }: BatchHandlerDeps) {
  for (const { seconds, messages } of settled.delays) {
    const failed = await queues
      .delay(messages, seconds)
      .catch(() => messages.map((message) => message.messageId));
    if (failed.length > 0) {
      logger.warn('Could not delay retried events; they return after the visibility timeout', {
        event: 'delay_failed',
        count: failed.length,
      });
    }
  }
}

function report(
  settled: Settlement<SQSRecord>,
  deadLettered: number,
  failures: number,
  { logger, metrics }: BatchHandlerDeps,
) {
  if (settled.retry.length > 0) {
    logger.warn('Events left to the queue for a later try', {
      event: 'events_retried',
      count: settled.retry.length,
      reasons: settled.retryReasons,
    });
  }
  metrics.addMetric('EventsDelivered', 'Count', settled.delivered);
  metrics.addMetric('EventsRejected', 'Count', deadLettered);
  metrics.addMetric('EventsRetried', 'Count', failures);
}
