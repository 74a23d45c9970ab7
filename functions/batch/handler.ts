import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { planBatches } from '../core/batch-plan.ts';
import { deliverChunks } from '../core/delivery.ts';
import type { DeliveryDeps, DeliveryOptions } from '../core/delivery-calls.ts';
import { BATCH_OUTCOME_BUDGET_MS, batchOutcomes, recordOutcomes } from '../core/event-outcomes.ts';
import { readMessages, type Settlement, settleBatch } from '../core/outcomes.ts';
import type { DeadLetter, DeliveryQueues, OutcomeStore, QueuedMessage } from '../core/ports.ts';
import type { RetryPolicy } from '../core/retry-policy.ts';

/** Everything the batch handler talks to; `compose.ts` builds the real ones. */
export interface BatchHandlerDeps extends DeliveryDeps {
  queues: DeliveryQueues;
  /** Where each event's outcome is written (contract §1.6); absent: none is. */
  outcomes?: OutcomeStore | undefined;
  retry: RetryPolicy;
  options: DeliveryOptions & {
    /** Longest visibility delay after a 429 (SQS allows 12 hours). */
    maxDelaySeconds: number;
    /** How long the function gathers more messages itself before delivering. */
    batchWindowMs: number;
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
    // A full hand says there is a backlog: its gathering ends once the queue is quiet. A smaller
    // one waits the window, gathering what trickles in, as the mapping's window did.
    const full = event.Records.length >= Math.min(FIFO_HAND_OVER, run.options.batchSize);
    const rest = run.options.batchSize - event.Records.length;
    let batch: QueuedMessage[] = [
      ...event.Records,
      ...(await gather(rest, run, deps, { quietMs: full ? GATHER_QUIET_MS : undefined })),
    ];
    let lastBatchMs = 0;
    for (;;) {
      const started = deps.clock.now();
      // Only what the backlog has now (waiting out a window here would hold the handed messages,
      // and so their records, until the invocation ends), and only with time to deliver it.
      const next = goOn(batch, run, started, lastBatchMs)
        ? gather(run.options.batchSize, run, deps, { windowMs: 0 })
        : undefined;
      const unsettled = await deliverBatch(batch, run, deps);
      failures ??= event.Records.filter((r) => unsettled.has(r.messageId)).map((r) => r.messageId);
      // Deleted while the next batch is delivered: none of its records is in the next batch,
      // whose messages the queue could not hand out while these were in flight.
      removals.push(removeSettled(own(batch), unsettled, deps, settleUntil(run.deadline)));
      lastBatchMs = deps.clock.now() - started;
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
 * is full), within the first half of the invocation, and with time left for two batches as long
 * as the last one took, so that the next is not gathered only to go back to the queue untried.
 */
function goOn(batch: QueuedMessage[], run: Run, now: number, lastBatchMs: number): boolean {
  if (batch.length < run.options.batchSize || run.signal.aborted) return false;
  const callsUntil = run.deadline - run.options.deadlineMarginMs;
  return now < run.goOnUntil && callsUntil - now > 2 * lastBatchMs;
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
  const now = deps.clock.now();
  const settled = settleBatch(messages, { ...read, unreadable: [] }, outcomes, {
    now,
    maxDelaySeconds: options.maxDelaySeconds,
    policy: deps.retry,
    random: deps.random,
  });
  // Before the queues are told: while its messages are in flight no later try of these events
  // writes an outcome, so the last one written is the last that happened. Best effort, bounded.
  const records = batchOutcomes(messages, read, outcomes, settled, now);
  const outcomesUntil = Math.min(until, now + BATCH_OUTCOME_BUDGET_MS);
  await recordOutcomes(deps.outcomes, records, deps, outcomesUntil);
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

/** Lambda's mapping hands a function at most this many messages of a FIFO queue. */
const FIFO_HAND_OVER = 10;

/**
 * After a full hand, gathering ends once the queue has been quiet this long, before the window
 * does: the rest of a sender's request lands within it, and a drained backlog's last messages go
 * out without waiting.
 */
const GATHER_QUIET_MS = 100;

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
 * Messages the function receives itself: up to `wanted`, within the batch window (at most a
 * quarter of the time left, so delivery keeps the rest), or until the queue is quiet.
 */
async function gather(
  wanted: number,
  { deadline, options }: Run,
  deps: BatchHandlerDeps,
  {
    windowMs = options.batchWindowMs,
    quietMs,
  }: { windowMs?: number; quietMs?: number | undefined } = {},
) {
  if (wanted <= 0) return [];
  const now = deps.clock.now();
  const until = now + Math.min(windowMs, Math.floor((deadline - now) / 4));
  // Hidden until the invocation ends and a margin after: a crash gives them back that soon.
  const margin = options.holdMarginSeconds ?? HOLD_MARGIN_SECONDS;
  const holdSeconds = Math.ceil((deadline - now) / 1000) + margin;
  return deps.queues.receive(wanted, until, quietMs, holdSeconds);
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
