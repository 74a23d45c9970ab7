import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { planBatches } from '../core/delivery/batch-plan.ts';
import { deliverChunks } from '../core/delivery/delivery.ts';
import type { DeliveryDeps } from '../core/delivery/delivery-calls.ts';
import { BATCH_OUTCOME_BUDGET_MS, batchOutcomes } from '../core/delivery/event-outcomes.ts';
import { readMessages, settleBatch } from '../core/delivery/outcomes.ts';
import { recordOutcomes } from '../core/outcome-writes.ts';
import type { OutcomeStore } from '../core/ports.ts';
import type { DeliveryQueues, QueuedMessage } from '../core/queue-ports.ts';
import type { RetryPolicy } from '../core/retry-policy.ts';
import { batches } from './gather.ts';
import { type BatchOptions, type Run, settleUntil, startRun } from './run.ts';
import { deadLetter, delay, removeOwnSettled, report } from './settle.ts';

/** Everything the batch handler talks to; `compose.ts` builds the real ones. */
export interface BatchHandlerDeps extends DeliveryDeps {
  queues: DeliveryQueues;
  /** Where each event's outcome is written (contract §1.6); absent: none is. */
  outcomes?: OutcomeStore | undefined;
  retry: RetryPolicy;
  options: BatchOptions;
  /** Whether the container's last gathering found the queue holding more (`gather.ts`). */
  backlog?: { seen: boolean };
}

export type BatchHandler = (
  event: SQSEvent,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
) => Promise<SQSBatchResponse>;

/**
 * The SQS-triggered batch function. The event source hands it at most 10 messages from the FIFO
 * queue; it receives the rest of its batch itself, up to `batchSize` within the batch window,
 * and, while a backlog lasts, its next batch during this one's delivery (`gather.ts`). Each
 * batch is delivered and settled (`deliverBatch`): the event source's messages through
 * `batchItemFailures` (by message id), the ones it received itself by deleting them once
 * delivered or dead-lettered. Nothing is acknowledged that was not delivered or dead-lettered.
 *
 * It builds the partial batch response itself rather than with Powertools'
 * `processPartialResponse`, which handles records one by one: here the unit of work is the
 * whole batch (one Mautic call for up to 200 records), and results map back by message id.
 */
export function createBatchHandler(deps: BatchHandlerDeps): BatchHandler {
  return async (event, context) => {
    const run = startRun(context.getRemainingTimeInMillis(), deps);
    const handed = new Set(event.Records.map((record) => record.receiptHandle));
    const failures = new Set<string>();
    // One batch is settled (outcomes written, then the queues told) while the next is delivered:
    // none of this batch's records is in the next one, whose messages the queue could not hand
    // out while these were in flight. Settlements run one after another, and a batch waits for
    // the one before the last: at most one is ever behind. A settlement's failure is kept and
    // thrown at the next wait, never left as a rejection no one awaits; the batch delivered
    // meanwhile is still settled first, so that what Mautic took is not delivered again.
    const settle = (batch: QueuedMessage[], delivered: Delivered) =>
      settleBatchOf(batch, delivered, run, deps).then((unsettled) => {
        // The handed messages are all in the first batch: its answer is theirs.
        for (const record of event.Records)
          if (unsettled.has(record.messageId)) failures.add(record.messageId);
        return removeOwnSettled(batch, handed, unsettled, deps, settleUntil(run));
      });
    let settling: Promise<void> = Promise.resolve();
    let broken: { error: unknown } | undefined;
    try {
      for await (const batch of batches(event.Records, run, deps)) {
        const delivered = await deliverBatch(batch, run, deps);
        await settling;
        if (broken) {
          await settle(batch, delivered).catch(() => {});
          break;
        }
        settling = settle(batch, delivered).catch((error: unknown) => {
          broken = { error };
        });
      }
    } finally {
      await settling;
    }
    if (broken) throw broken.error;
    return {
      batchItemFailures: [...failures].map((itemIdentifier) => ({ itemIdentifier })),
    };
  };
}

/** What delivering a batch left to settle. */
interface Delivered {
  read: ReturnType<typeof readMessages>;
  outcomes: Awaited<ReturnType<typeof deliverChunks>>;
  /** The message ids of letters sent before delivery that could not be sent. */
  early: string[];
}

/**
 * Delivers one batch: read, dead-letter the unreadable, plan, deliver. The letters that need no
 * delivery go first: should this invocation die during delivery, a message on its last allowed
 * receive is already dead-lettered with its reason, not moved by the queue without one.
 */
async function deliverBatch(
  messages: QueuedMessage[],
  run: Run,
  deps: BatchHandlerDeps,
): Promise<Delivered> {
  const { deadline, options, signal } = run;
  const read = readMessages(messages, deps.retry.maxReceiveCount);
  const early = await deadLetter(read.unreadable, deps, settleUntil(run));
  const plan = planBatches(read.incoming, options.batchSize);
  const outcomes = await deliverChunks(plan, deadline, deps, options, signal);
  return { read, outcomes, early };
}

/**
 * Settles a delivered batch: maps the outcomes, writes them, then sends the dead letters and
 * delays the retried. Answers the message ids that are not settled (left to the queue, or whose
 * dead letter could not be sent). Each step bounds and catches its own calls' failures; only
 * an unexpected error (a metrics sink that throws, say) rejects it.
 */
async function settleBatchOf(
  messages: QueuedMessage[],
  { read, outcomes, early }: Delivered,
  run: Run,
  deps: BatchHandlerDeps,
): Promise<Set<string>> {
  const { options } = run;
  const until = settleUntil(run);
  const now = deps.clock.now();
  const settled = settleBatch(messages, read, outcomes, {
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
  if (deps.health) {
    deps.metrics.addMetric('MauticCircuitOpen', 'Count', deps.health.closed() ? 0 : 1);
    await deps.health.flush();
  }
  return unsettled;
}
