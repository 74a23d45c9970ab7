import { itemsThatFit, nextBatchFits } from '../core/delivery/call-budget.ts';
import type { MauticHealth } from '../core/delivery/mautic-health.ts';
import type { MauticItemTime } from '../core/delivery/mautic-item-time.ts';
import type { Clock } from '../core/ports.ts';
import type { DeliveryQueues, QueuedMessage } from '../core/queue-ports.ts';
import type { Run } from './run.ts';

/** A gathering's receives are long polls of a second: the last may end this long past its window. */
const LONG_POLL_MS = 1_000;

/** How much longer than the invocation's time left the function's own messages stay hidden. */
const HOLD_MARGIN_SECONDS = 30;

interface GatherDeps {
  queues: DeliveryQueues;
  clock: Clock;
  /** Mautic's observed time per item: how many a batch may hold, whether a next one fits. */
  itemTime?: MauticItemTime | undefined;
  /**
   * Whether the container's last gathering got all it asked for: the queue held more, so a
   * backlog (or a burst still arriving) goes on, whatever the size of the next hand. Lives as
   * long as the container.
   */
  backlog?: { seen: boolean } | undefined;
  /** Mautic's shared health, read once per batch: whether a next batch could be called at all. */
  health?: MauticHealth | undefined;
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
  let batch: QueuedMessage[] = [...handed, ...(await gatherRest(handed.length, run, deps))];
  for (;;) {
    // Once per batch: whether to call, probe or hold it, and whether to go on.
    await deps.health?.refresh();
    // Received while this one is delivered, only when both are expected in time at Mautic's pace.
    const next = goOn(batch, run, deps) ? gather(run.options.batchSize, run, deps) : undefined;
    yield batch;
    batch = next === undefined ? [] : await next;
    if (batch.length === 0) return;
  }
}

/**
 * The rest of the first batch, received by the function itself. A full hand (as many as the
 * event source hands at most), or any hand while the container's last gathering found the queue
 * holding more, says there is a backlog: it gathers up to the batch size, as many as are
 * expected to be delivered in time. Otherwise a smaller hand says there is none: it is
 * delivered at once, since waiting for more would be billed as the function's duration whether
 * or not any came (at a trickle, most of its time).
 */
async function gatherRest(hand: number, run: Run, deps: GatherDeps): Promise<QueuedMessage[]> {
  const { batchSize, deadlineMarginMs, handOver = 1 } = run.options;
  if (hand < handOver && deps.backlog?.seen !== true) return [];
  const now = deps.clock.now();
  const callsFrom = now + gatheringMs(run, now);
  const msPerItem = deps.itemTime?.msPerItem;
  const fit = itemsThatFit(run.deadline - deadlineMarginMs - callsFrom, msPerItem, batchSize);
  return gather(fit - hand, run, deps);
}

/**
 * Whether to gather and deliver another batch after this one: while a backlog lasts (this batch
 * is full), within the first half of the invocation, and when, at Mautic's observed pace, this
 * batch and a full next one are both expected to be delivered before calls must stop (never
 * before anything was observed), so that the next is not gathered only to be cut off or sent
 * back untried.
 */
function goOn(batch: QueuedMessage[], run: Run, deps: GatherDeps): boolean {
  const { batchSize, deadlineMarginMs } = run.options;
  const now = deps.clock.now();
  if (batch.length < batchSize || run.signal.aborted || now >= run.goOnUntil) return false;
  // Mautic failing as a whole and no probe due: the next batch would be held as this one.
  if (deps.health !== undefined && !deps.health.mayCall()) return false;
  return nextBatchFits(run.deadline - deadlineMarginMs - now, deps.itemTime?.msPerItem, {
    current: batch.length,
    batchSize,
    gatherMs: gatheringMs(run, now),
  });
}

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
 * whole long poll brought nothing and no other poll brought anything meanwhile (nothing more is
 * arriving).
 */
async function gather(wanted: number, run: Run, deps: GatherDeps): Promise<QueuedMessage[]> {
  if (wanted <= 0) return [];
  const now = deps.clock.now();
  const { until, pollSeconds } = gathering(run, now);
  // Hidden until the invocation ends and a margin after: a crash gives them back that soon.
  const margin = run.options.holdMarginSeconds ?? HOLD_MARGIN_SECONDS;
  const holdSeconds = Math.ceil((run.deadline - now) / 1000) + margin;
  const received = await deps.queues.receive(wanted, until, holdSeconds, pollSeconds);
  if (deps.backlog) deps.backlog.seen = received.length >= wanted;
  return received;
}
