import type { Settlement } from '../core/delivery/outcomes.ts';
import type { Clock, Logger, MetricsSink } from '../core/ports.ts';
import type { DeadLetter, DeliveryQueues, QueuedMessage } from '../core/queue-ports.ts';

interface SettleDeps {
  queues: DeliveryQueues;
  logger: Logger;
}

/** Sends the dead letters; answers the message ids that could not be sent (they stay queued). */
export async function deadLetter(
  letters: ReadonlyArray<DeadLetter & { message: QueuedMessage }>,
  { queues, logger }: SettleDeps,
  until: number,
): Promise<string[]> {
  if (letters.length === 0) return [];
  const notSent = await queues
    .deadLetter(letters, until)
    .catch(() => letters.map((letter) => letter.message.messageId));
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
 * Hides each retried message for its backoff (or until the time Mautic named), so a failure
 * that is not the event's own spends time, not receives: all in calls of ten, whatever their
 * delays, at once. A delay that cannot be set leaves the queue's own visibility timeout.
 */
export async function delay(
  settled: Settlement<QueuedMessage>,
  { queues, logger }: SettleDeps,
  until: number,
) {
  const delays = settled.delays.flatMap(({ seconds, messages }) =>
    messages.map((message) => ({ message, seconds })),
  );
  if (delays.length === 0) return;
  const failed = await queues
    .delay(delays, until)
    .catch(() => delays.map(({ message }) => message.messageId));
  if (failed.length > 0) {
    logger.warn('Could not delay retried events; they return after the visibility timeout', {
      event: 'delay_failed',
      count: failed.length,
    });
  }
}

/**
 * Deletes the messages of `batch` the function received itself (not `handed` over by the event
 * source, which answers for those) that are settled: delivered or dead-lettered.
 */
export async function removeOwnSettled(
  batch: ReadonlyArray<QueuedMessage>,
  handed: ReadonlySet<string>,
  unsettled: ReadonlySet<string>,
  { queues, logger }: SettleDeps,
  until: number,
): Promise<void> {
  // By receipt handle: a handed message retried in this invocation can come back to one of
  // its own receives under a new handle, and is then its own to delete.
  const settled = batch.filter(
    (message) => !handed.has(message.receiptHandle) && !unsettled.has(message.messageId),
  );
  if (settled.length === 0) return;
  const failed = await queues
    .remove(settled, until)
    .catch(() => settled.map((message) => message.messageId));
  if (failed.length > 0) {
    // They come back after the visibility timeout and are delivered again: at least once.
    logger.warn('Could not delete delivered events; they return after the visibility timeout', {
      event: 'delete_failed',
      count: failed.length,
    });
  }
}

export function report(
  settled: Settlement<QueuedMessage>,
  deadLettered: number,
  failures: number,
  { logger, metrics, clock }: { logger: Logger; metrics: MetricsSink; clock: Clock },
) {
  if (settled.retry.length > 0) {
    // Its own age metric: SQS's ApproximateAgeOfOldestMessage leaves out a message received
    // three times or more, so it loses sight of every event being retried.
    const oldestSeconds = oldestAgeSeconds(settled.retry, clock.now());
    logger.warn('Events left to the queue for a later try', {
      event: 'events_retried',
      count: settled.retry.length,
      oldestSeconds,
      reasons: settled.retryReasons,
    });
    metrics.addMetric('OldestRetriedEventAge', 'Seconds', oldestSeconds);
  }
  metrics.addMetric('EventsDelivered', 'Count', settled.delivered);
  metrics.addMetric('EventsRejected', 'Count', deadLettered);
  metrics.addMetric('EventsRetried', 'Count', failures);
}

/** Seconds since the earliest first receive of `messages` (now, for one without the attribute). */
function oldestAgeSeconds(messages: ReadonlyArray<QueuedMessage>, now: number): number {
  const first = Math.min(
    ...messages.map(
      (message) => Number(message.attributes.ApproximateFirstReceiveTimestamp) || now,
    ),
  );
  return Math.max(0, Math.round((now - first) / 1000));
}
