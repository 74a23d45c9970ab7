import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { planBatches } from '../core/batch-plan.ts';
import { itemsThatFit, nextBatchFits } from '../core/call-budget.ts';
import { deliverChunks } from '../core/delivery.ts';
import type { DeliveryDeps, DeliveryOptions } from '../core/delivery-calls.ts';
import { readMessages, type Settlement, settleBatch } from '../core/outcomes.ts';
import type { DeadLetter, DeliveryQueues, QueuedMessage } from '../core/ports.ts';
import type { RetryPolicy } from '../core/retry-policy.ts';

/** Everything the batch handler talks to; `compose.ts` builds the real ones. */
export interface BatchHandlerDeps extends DeliveryDeps {
  queues: DeliveryQueues;
  retry: RetryPolicy;
  options: DeliveryOptions & {
    /** Longest visibility delay after a 429 (SQS allows 12 hours). */
    maxDelaySeconds: number;
    /** How long the function gathers more messages itself, after a full hand, before delivering. */
    batchWindowMs: number;
    /**
     * The most messages the event source hands at once (the mapping's batch size: 10 from a FIFO
     * queue, fewer with a smaller `batchSize`). A smaller hand says the queue had no more, and is
     * delivered at once. Unset, any hand may be part of a backlog, and is gathered to.
     */
    handOver?: number;
    /**
     * How much longer than the invocation's time left its own messages stay hidden, so that a
     * crash gives them back soon. @default 30 s
     */
    holdMarginSeconds?: number;
  };
}

export type BatchHandler = (
  event: SQSEvent,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
) => Promise<SQSBatchResponse>;

/**
 * The SQS-triggered batch function. The event source hands it at most 10 messages from the FIFO
 * queue; it receives the rest of its batch itself, up to `batchSize` within the batch window,
 * plans the Mautic calls, delivers them, dead-letters what Mautic refused for good, delays what
 * is retried, and settles every message: the event source's own through `batchItemFailures` (by
 * message id), the ones it received itself by deleting them once delivered or dead-lettered.
 * Nothing is acknowledged that was not delivered or dead-lettered.
 *
 * While a backlog lasts (the last batch was full) and the first half of the invocation's time
 * has not passed, it gathers its next batch during this one's delivery and goes on with it, so
 * that receiving costs no time of its own. The FIFO queue hands out no message of a record
 * whose earlier message is in flight, so the next batch never overtakes this one's records.
 *
 * It builds the partial batch response itself rather than with Powertools'
 * `processPartialResponse`, which handles records one by one: here the unit of work is the
 * whole batch (one Mautic call for up to 200 records), and results map back by message id.
 */
export function createBatchHandler(deps: BatchHandlerDeps): BatchHandler {
  return async (event, context) => {
    const remainingMs = context.getRemainingTimeInMillis();
    const run = { ...timing(remainingMs, deps), goOnUntil: deps.clock.now() + remainingMs / 2 };
    // By receipt handle: a handed message retried in this invocation can come back to one of
    // its own receives under a new handle, and is then its own to delete.
    const handed = new Set(event.Records.map((record) => record.receiptHandle));
    const own = (messages: QueuedMessage[]) => messages.filter((m) => !handed.has(m.receiptHandle));
    let failures: string[] | undefined;
    const removals: Array<Promise<void>> = [];
    let batch: QueuedMessage[] = [...event.Records, ...(await gatherRest(event, run, deps))];
    for (;;) {
      // The next batch is received while this one is delivered, only when both are expected to
      // be delivered in time at Mautic's pace.
      const next = goOn(batch, run, deps) ? gather(run.options.batchSize, run, deps) : undefined;
      const unsettled = await deliverBatch(batch, run, deps);
      failures ??= event.Records.filter((r) => unsettled.has(r.messageId)).map((r) => r.messageId);
      // Deleted while the next batch is delivered: none of its records is in the next batch,
      // whose messages the queue could not hand out while these were in flight.
      removals.push(removeSettled(own(batch), unsettled, deps, settleUntil(run.deadline)));
      batch = next === undefined ? [] : await next;
      if (batch.length === 0) break;
    }
    await Promise.all(removals);
    return {
      batchItemFailures: (failures ?? []).map((itemIdentifier) => ({ itemIdentifier })),
    };
  };
}

type Run = ReturnType<typeof timing> & { goOnUntil: number };

/**
 * Whether to gather and deliver another batch after this one: while a backlog lasts (this batch
 * is full), within the first half of the invocation, and when, at Mautic's observed pace, this
 * batch and a full next one are both expected to be delivered before calls must stop (never
 * before anything was observed), so that the next is not gathered only to be cut off or sent
 * back untried.
 */
function goOn(batch: QueuedMessage[], run: Run, deps: BatchHandlerDeps): boolean {
  const { batchSize, deadlineMarginMs } = run.options;
  const now = deps.clock.now();
  if (batch.length < batchSize || run.signal.aborted || now >= run.goOnUntil) return false;
  return nextBatchFits(run.deadline - deadlineMarginMs - now, deps.itemTime?.msPerItem, {
    current: batch.length,
    batchSize,
    gatherMs: gatheringMs(run, now),
  });
}

/**
 * The rest of the first batch, received by the function itself. A full hand of 10 says there is
 * a backlog: it gathers up to the batch size, as many as are expected to be delivered in time.
 * A smaller hand says there is none: it is delivered at once, since waiting for more would be
 * billed as the function's duration whether or not any came (at a trickle, most of its time).
 */
async function gatherRest(event: SQSEvent, run: Run, deps: BatchHandlerDeps) {
  const { batchSize, deadlineMarginMs } = run.options;
  const hand = event.Records.length;
  if (hand < (run.options.handOver ?? 1)) return [];
  const now = deps.clock.now();
  const callsFrom = now + gatheringMs(run, now);
  const msPerItem = deps.itemTime?.msPerItem;
  const fit = itemsThatFit(run.deadline - deadlineMarginMs - callsFrom, msPerItem, batchSize);
  return gather(fit - hand, run, deps);
}

/**
 * Delivers one batch and settles it: dead letters sent, retried messages delayed. Answers the
 * message ids that are not settled (left to the queue, or whose dead letter could not be sent).
 */
async function deliverBatch(
  messages: QueuedMessage[],
  { deadline, options, signal }: Run,
  deps: BatchHandlerDeps,
): Promise<Set<string>> {
  const read = readMessages(messages, deps.retry.maxReceiveCount);
  const until = settleUntil(deadline);
  // Letters that need no delivery go first: should this invocation die during delivery, a
  // message on its last allowed receive is already dead-lettered with its reason, not moved
  // by the queue without one.
  const early = await deadLetter(read.unreadable, deps, until);
  const outcomes = await deliverChunks(
    planBatches(read.incoming, options.batchSize),
    deadline,
    deps,
    options,
    signal,
  );
  const settled = settleBatch(messages, { ...read, unreadable: [] }, outcomes, {
    now: deps.clock.now(),
    maxDelaySeconds: options.maxDelaySeconds,
    policy: deps.retry,
    random: deps.random,
  });
  // Dead letters and delays concern different messages: both at once, bounded by the deadline.
  const [late] = await Promise.all([
    deadLetter(settled.deadLetters, deps, until),
    delay(settled, deps, until),
  ]);
  const notDeadLettered = [...early, ...late];
  const unsettled = new Set([...settled.retry.map((m) => m.messageId), ...notDeadLettered]);
  const letters = read.unreadable.length + settled.deadLetters.length;
  report(settled, letters - notDeadLettered.length, unsettled.size, deps);
  return unsettled;
}

/** A gathering's receives are long polls of a second: the last may end this long past its window. */
const LONG_POLL_MS = 1_000;

/**
 * Settling ends this long before the deadline at the latest, so that the handler answers in
 * time: an answer after it fails the whole batch, delivered messages included. The delivery
 * stops calling Mautic `deadlineMarginMs` before the deadline, leaving settling the rest.
 */
const ANSWER_RESERVE_MS = 300;

const settleUntil = (deadline: number) => deadline - ANSWER_RESERVE_MS;

/** How much longer than the invocation's time left the function's own messages stay hidden. */
const HOLD_MARGIN_SECONDS = 30;

/**
 * When a gathering starting `now` stops starting receives, and how long each waits. It ends
 * within the batch window and a quarter of the time left (delivery keeps the rest), the long
 * poll started last included. A window under a second or an invocation too short for a long
 * poll in that quarter (neither is possible with the settings, which count whole seconds and
 * give the function 10 s or more: only compressed tests) takes what short polls find instead.
 */
function gathering({ deadline, options }: Run, now: number) {
  const quarter = Math.floor((deadline - now) / 4);
  const window = Math.max(0, Math.min(options.batchWindowMs, quarter));
  if (quarter <= LONG_POLL_MS || window < LONG_POLL_MS) {
    return { until: now + window, pollSeconds: 0 as const, lastsMs: window };
  }
  const receiving = Math.min(window, quarter - LONG_POLL_MS);
  return { until: now + receiving, pollSeconds: 1 as const, lastsMs: receiving + LONG_POLL_MS };
}

/** How long a gathering starting `now` may last (none: 0). */
function gatheringMs(run: Run, now: number): number {
  const plan = gathering(run, now);
  return plan.until > now ? plan.lastsMs : 0;
}

/**
 * Messages the function receives itself: up to `wanted`, within the batch window, ending once a
 * whole long poll brought nothing (nothing more is arriving).
 */
async function gather(wanted: number, run: Run, deps: BatchHandlerDeps) {
  if (wanted <= 0) return [];
  const now = deps.clock.now();
  const { until, pollSeconds } = gathering(run, now);
  // Hidden until the invocation ends and a margin after: a crash gives them back that soon.
  const margin = run.options.holdMarginSeconds ?? HOLD_MARGIN_SECONDS;
  const holdSeconds = Math.ceil((run.deadline - now) / 1000) + margin;
  return deps.queues.receive(wanted, until, holdSeconds, pollSeconds);
}

/** Deletes the messages the function received itself that are settled (delivered or dead-lettered). */
async function removeSettled(
  own: ReadonlyArray<QueuedMessage>,
  unsettled: ReadonlySet<string>,
  { queues, logger }: BatchHandlerDeps,
  until: number,
): Promise<void> {
  const settled = own.filter((message) => !unsettled.has(message.messageId));
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
  letters: ReadonlyArray<DeadLetter & { message: QueuedMessage }>,
  { queues, logger }: BatchHandlerDeps,
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
async function delay(
  settled: Settlement<QueuedMessage>,
  { queues, logger }: BatchHandlerDeps,
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

function report(
  settled: Settlement<QueuedMessage>,
  deadLettered: number,
  failures: number,
  { logger, metrics, clock }: BatchHandlerDeps,
) {
  if (settled.retry.length > 0) {
    // Its own age metric: SQS's ApproximateAgeOfOldestMessage leaves out a message received
    // three times or more, so it loses sight of every event being retried (issue 26).
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
