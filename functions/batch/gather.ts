import type { Clock } from '../core/ports.ts';
import type { DeliveryQueues, QueuedMessage } from '../core/queue-ports.ts';
import type { Run } from './run.ts';

/** Lambda's mapping hands a function at most this many messages of a FIFO queue. */
const FIFO_HAND_OVER = 10;

/**
 * After a full hand, gathering ends once the queue has been quiet this long, before the window
 * does: the rest of a sender's request lands within it, and a drained backlog's last messages go
 * out without waiting.
 */
const GATHER_QUIET_MS = 100;

/** How much longer than the invocation's time left the function's own messages stay hidden. */
const HOLD_MARGIN_SECONDS = 30;

interface GatherDeps {
  queues: DeliveryQueues;
  clock: Clock;
}

/**
 * The invocation's batches: the messages the event source handed over, with the rest the
 * function receives itself; then, while a backlog lasts, the next batch, gathered while the
 * caller delivers this one. The FIFO queue hands out no message of a record whose earlier
 * message is in flight, so the next batch never overtakes this one's records.
 */
export async function* batches(
  handed: ReadonlyArray<QueuedMessage>,
  run: Run,
  deps: GatherDeps,
): AsyncGenerator<QueuedMessage[]> {
  // A full hand says there is a backlog: its gathering ends once the queue is quiet. A smaller
  // one waits the window, gathering what trickles in, as the mapping's window did.
  const full = handed.length >= Math.min(FIFO_HAND_OVER, run.options.batchSize);
  const rest = run.options.batchSize - handed.length;
  let batch: QueuedMessage[] = [
    ...handed,
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
    yield batch;
    lastBatchMs = deps.clock.now() - started;
    batch = next === undefined ? [] : await next;
    if (batch.length === 0) return;
  }
}

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
 * Messages the function receives itself: up to `wanted`, within the batch window (at most a
 * quarter of the time left, so delivery keeps the rest), or until the queue is quiet.
 */
async function gather(
  wanted: number,
  { deadline, options }: Run,
  deps: GatherDeps,
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
