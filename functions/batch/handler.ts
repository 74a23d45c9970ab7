import type { Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type IncomingEvent, planBatches } from '../core/batch-plan.ts';
import {
  type DeliveryDeps,
  type DeliveryOptions,
  deliverChunks,
  type MessageOutcome,
} from '../core/delivery.ts';
import { describeIssues, queuedEventSchema } from '../core/events.ts';
import type { DeadLetter, DeliveryQueues } from '../core/ports.ts';

/** Everything the batch handler talks to; `index.ts` builds the real ones. */
export interface BatchHandlerDeps extends Omit<DeliveryDeps, 'logger' | 'metrics'> {
  queues: DeliveryQueues;
  logger: PowertoolsLogger;
  metrics: Metrics;
  options: DeliveryOptions & {
    /** Longest visibility delay after a 429 (SQS allows 12 hours). */
    maxDelaySeconds: number;
  };
}

/**
 * The SQS-triggered batch function: parses each record into a queued event, delivers the batch
 * to Mautic, dead-letters what Mautic refused for good, delays what hit the rate limit, and
 * reports every other failure by message id in `batchItemFailures`. Nothing is acknowledged
 * that was not delivered or dead-lettered.
 *
 * It builds the partial batch response itself rather than with Powertools'
 * `processPartialResponse`, which handles records one by one: here the unit of work is the
 * whole batch (one Mautic call for up to 200 records), and results map back by message id.
 */
export function createBatchHandler(deps: BatchHandlerDeps) {
  return middy<SQSEvent, SQSBatchResponse>()
    .use(injectLambdaContext(deps.logger))
    .use(logMetrics(deps.metrics))
    .handler((event: SQSEvent, context: Context) => processBatch(event.Records, context, deps));
}

async function processBatch(
  records: SQSRecord[],
  context: Context,
  deps: BatchHandlerDeps,
): Promise<SQSBatchResponse> {
  const { logger, metrics, clock } = deps;
  const remainingMs = context.getRemainingTimeInMillis();
  const deadline = clock.now() + remainingMs;
  // A short timeout cannot give up the whole margin: keep at most a quarter of it in reserve.
  const options = {
    ...deps.options,
    deadlineMarginMs: Math.min(deps.options.deadlineMarginMs, Math.floor(remainingMs / 4)),
  };
  // Calls in flight are aborted at half the margin, leaving time to dead-letter and answer.
  const signal = AbortSignal.timeout(
    Math.max(1, Math.floor(remainingMs - options.deadlineMarginMs / 2)),
  );

  const incoming: IncomingEvent[] = [];
  const letters: DeadLetter[] = [];
  for (const record of records) {
    const parsed = parseRecord(record);
    if ('event' in parsed) incoming.push({ messageId: record.messageId, event: parsed.event });
    else letters.push({ message: record, reason: 'invalid_event', detail: parsed.problem });
  }

  const outcomes = await deliverChunks(
    planBatches(incoming, options.batchSize),
    deadline,
    deps,
    options,
    signal,
  );

  const events = new Map(incoming.map(({ messageId, event }) => [messageId, event]));
  const retry: SQSRecord[] = [];
  let delivered = 0;
  for (const record of records) {
    const outcome: MessageOutcome | undefined = outcomes.get(record.messageId);
    const event = events.get(record.messageId);
    if (outcome?.kind === 'delivered') delivered++;
    else if (outcome?.kind === 'rejected' && event) {
      letters.push({
        message: record,
        reason: outcome.reason,
        detail: outcome.message,
        ...(outcome.status === undefined ? {} : { status: outcome.status }),
        entity: event.entity,
        action: event.action,
      });
    } else if (event) retry.push(record);
  }

  const notSent = new Set(await deps.queues.deadLetter(letters));
  if (notSent.size > 0) {
    logger.error('Could not reach the dead-letter queue; those events stay on the events queue', {
      count: notSent.size,
    });
  }
  for (const letter of letters) {
    if (notSent.has(letter.message.messageId)) continue;
    logger.warn('Event dead-lettered', {
      messageId: letter.message.messageId,
      eventId: events.get(letter.message.messageId)?.eventId,
      reason: letter.reason,
      status: letter.status,
      entity: letter.entity,
      action: letter.action,
    });
  }
  await delayRateLimited(retry, outcomes, deps);

  const failures = [...retry.map((record) => record.messageId), ...notSent];
  if (retry.length > 0) {
    const reasons: Record<string, number> = {};
    for (const record of retry) {
      const outcome = outcomes.get(record.messageId);
      const reason = outcome?.kind === 'retry' ? outcome.reason : 'no_outcome';
      reasons[reason] = (reasons[reason] ?? 0) + 1;
    }
    logger.warn('Events left to the queue for a later try', { count: retry.length, reasons });
  }
  metrics.addMetric('EventsDelivered', 'Count', delivered);
  metrics.addMetric('EventsRejected', 'Count', letters.length - notSent.size);
  metrics.addMetric('EventsRetried', 'Count', failures.length);
  return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })) };
}

function parseRecord(record: SQSRecord): { event: IncomingEvent['event'] } | { problem: string } {
  let body: unknown;
  try {
    body = JSON.parse(record.body);
  } catch {
    return { problem: 'The message body is not JSON' };
  }
  const result = queuedEventSchema.safeParse(body);
  return result.success ? { event: result.data } : { problem: describeIssues(result.error) };
}

/** Hides rate-limited messages until Mautic's window resets, so they do not come back early. */
async function delayRateLimited(
  retry: SQSRecord[],
  outcomes: Map<string, MessageOutcome>,
  deps: BatchHandlerDeps,
): Promise<void> {
  const bySeconds = new Map<number, SQSRecord[]>();
  for (const record of retry) {
    const outcome = outcomes.get(record.messageId);
    if (outcome?.kind !== 'retry' || outcome.notBefore === undefined) continue;
    const wait = Math.ceil((outcome.notBefore - deps.clock.now()) / 1000);
    // A reset already past (or under a second away) needs no delay: setting the visibility to
    // 0 would bring the message straight back, sooner than the queue's own timeout.
    if (wait < 1) continue;
    const seconds = Math.min(deps.options.maxDelaySeconds, wait);
    bySeconds.set(seconds, [...(bySeconds.get(seconds) ?? []), record]);
  }
  for (const [seconds, records] of bySeconds) {
    const failed = await deps.queues
      .delay(records, seconds)
      .catch(() => records.map((record) => record.messageId));
    if (failed.length > 0) {
      deps.logger.warn(
        'Could not delay rate-limited events; they return after the visibility timeout',
        {
          count: failed.length,
        },
      );
    }
  }
}
